#include "comm/grpc_store.h"

#include <utility>

namespace deepnet::comm {

namespace {

std::vector<uint8_t> Bytes(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string Text(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

// c10d reports failures as c10::Error.
template <typename T>
T ValueOrThrow(absl::StatusOr<T> result) {
  if (!result.ok()) C10_THROW_ERROR(Error, std::string(result.status().message()));
  return *std::move(result);
}

void OkOrThrow(const absl::Status& status) {
  if (!status.ok()) C10_THROW_ERROR(Error, std::string(status.message()));
}

}  // namespace

absl::StatusOr<c10::intrusive_ptr<GrpcStore>> GrpcStore::Create(const GrpcStoreOptions& options) {
  absl::StatusOr<std::shared_ptr<const RendezvousClient>> client =
      RendezvousClient::Create(options);
  if (!client.ok()) return client.status();
  return c10::make_intrusive<GrpcStore>(Token{}, *std::move(client), options.timeout);
}

absl::StatusOr<c10::intrusive_ptr<GrpcStore>> GrpcStore::Create(
    std::shared_ptr<grpc::Channel> channel, const GrpcStoreOptions& options) {
  absl::StatusOr<std::shared_ptr<const RendezvousClient>> client =
      RendezvousClient::Create(std::move(channel), options);
  if (!client.ok()) return client.status();
  return c10::make_intrusive<GrpcStore>(Token{}, *std::move(client), options.timeout);
}

GrpcStore::GrpcStore(Token, std::shared_ptr<const RendezvousClient> client,
                     std::chrono::milliseconds timeout)
    : c10d::Store(timeout), client_(std::move(client)) {}

GrpcStore::~GrpcStore() = default;

const std::string& GrpcStore::address() const { return client_->options().address; }

c10::intrusive_ptr<c10d::Store> GrpcStore::clone() {
  return c10::make_intrusive<GrpcStore>(Token{}, client_, timeout_);
}

void GrpcStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  OkOrThrow(client_->Set(key, Text(value)));
}

std::vector<uint8_t> GrpcStore::compareSet(const std::string& key,
                                           const std::vector<uint8_t>& expected_value,
                                           const std::vector<uint8_t>& desired_value) {
  return Bytes(ValueOrThrow(client_->CompareSet(key, Text(expected_value), Text(desired_value))));
}

std::vector<uint8_t> GrpcStore::get(const std::string& key) {
  return Bytes(ValueOrThrow(client_->Get(key, timeout_)));
}

int64_t GrpcStore::add(const std::string& key, int64_t value) {
  return ValueOrThrow(client_->Add(key, value));
}

bool GrpcStore::deleteKey(const std::string& key) { return ValueOrThrow(client_->Delete(key)); }

bool GrpcStore::check(const std::vector<std::string>& keys) {
  return ValueOrThrow(client_->Check(keys));
}

int64_t GrpcStore::getNumKeys() { return ValueOrThrow(client_->NumKeys()); }

void GrpcStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void GrpcStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  OkOrThrow(client_->Wait(keys, timeout));
}

}  // namespace deepnet::comm
