#include "rpc/request_check.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/message.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/slice.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace deepnet::rpc {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

constexpr int kMaxDepth = 32;
constexpr size_t kMaxKeyInPath = 64;

// Finds the first bad string field of a message's wire bytes, by its descriptor (the parser
// itself only says "failed"). Stops quietly at malformed wire data: the parse that follows
// reports it.
class Walker {
 public:
  explicit Walker(const RequestCheckOptions& options) : options_(options) {}

  absl::Status Message(absl::string_view bytes, const Descriptor* type, const std::string& prefix,
                       int depth) {
    if (depth > kMaxDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, ": messages nested more than ", kMaxDepth, " deep"));
    }
    CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                        static_cast<int>(bytes.size()));
    std::vector<std::pair<int, int>> seen;  // field number -> values met so far
    while (true) {
      const uint32_t tag = in.ReadTag();
      if (tag == 0) return absl::OkStatus();
      const FieldDescriptor* field =
          type->FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
      const bool walked =
          field != nullptr &&
          WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
          (field->type() == FieldDescriptor::TYPE_STRING ||
           field->type() == FieldDescriptor::TYPE_MESSAGE);
      if (!walked) {
        if (!WireFormatLite::SkipField(&in, tag)) return absl::OkStatus();
        continue;
      }
      uint32_t length = 0;
      if (!in.ReadVarint32(&length)) return absl::OkStatus();
      const size_t at = static_cast<size_t>(in.CurrentPosition());
      if (length > bytes.size() - at) return absl::OkStatus();
      const absl::string_view value = bytes.substr(at, length);
      if (!in.Skip(static_cast<int>(length))) return absl::OkStatus();

      std::string path = prefix.empty() ? field->name() : absl::StrCat(prefix, ".", field->name());
      if (field->is_map()) {
        if (absl::Status s = MapEntry(value, field->message_type(), path, depth); !s.ok()) return s;
        continue;
      }
      if (field->is_repeated()) {
        auto it = std::find_if(seen.begin(), seen.end(),
                               [&](const auto& p) { return p.first == field->number(); });
        if (it == seen.end()) it = seen.insert(seen.end(), {field->number(), 0});
        path = absl::StrCat(path, "[", it->second++, "]");
      }
      absl::Status s = field->type() == FieldDescriptor::TYPE_STRING
                           ? String(value, path, field)
                           : Message(value, field->message_type(), path, depth + 1);
      if (!s.ok()) return s;
    }
  }

 private:
  // A map entry: key (1) and value (2). The value is named by its key when the key is short
  // and clean: labels["team"].
  absl::Status MapEntry(absl::string_view bytes, const Descriptor* entry, const std::string& map,
                        int depth) {
    const FieldDescriptor* key_field = entry->FindFieldByNumber(1);
    const FieldDescriptor* value_field = entry->FindFieldByNumber(2);
    absl::string_view key, value;
    bool has_value = false;
    CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                        static_cast<int>(bytes.size()));
    while (true) {
      const uint32_t tag = in.ReadTag();
      if (tag == 0) break;
      const int number = WireFormatLite::GetTagFieldNumber(tag);
      if ((number != 1 && number != 2) ||
          WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        if (!WireFormatLite::SkipField(&in, tag)) return absl::OkStatus();
        continue;
      }
      uint32_t length = 0;
      if (!in.ReadVarint32(&length)) return absl::OkStatus();
      const size_t at = static_cast<size_t>(in.CurrentPosition());
      if (length > bytes.size() - at) return absl::OkStatus();
      (number == 1 ? key : value) = bytes.substr(at, length);
      if (number == 2) has_value = true;
      if (!in.Skip(static_cast<int>(length))) return absl::OkStatus();
    }
    std::string value_path = absl::StrCat(map, "[...]");
    if (key_field != nullptr && key_field->type() == FieldDescriptor::TYPE_STRING) {
      if (absl::Status s = String(key, absl::StrCat(map, " (a key)"), key_field); !s.ok()) return s;
      if (key.size() <= kMaxKeyInPath) value_path = absl::StrCat(map, "[\"", key, "\"]");
    }
    if (!has_value || value_field == nullptr) return absl::OkStatus();
    if (value_field->type() == FieldDescriptor::TYPE_STRING) {
      return String(value, value_path, value_field);
    }
    if (value_field->type() == FieldDescriptor::TYPE_MESSAGE) {
      return Message(value, value_field->message_type(), value_path, depth + 1);
    }
    return absl::OkStatus();
  }

  absl::Status String(absl::string_view value, const std::string& path,
                      const FieldDescriptor* field) {
    size_t bad = 0;
    if (!IsValidUtf8(value, &bad)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": invalid UTF-8 at byte ", bad));
    }
    if (const size_t nul = value.find('\0'); nul != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": contains a NUL byte at byte ", nul));
    }
    if (value.size() > options_.max_string_bytes && !IsLongField(field)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", value.size(),
                                                     " bytes, more than the ",
                                                     options_.max_string_bytes, " allowed"));
    }
    return absl::OkStatus();
  }

  bool IsLongField(const FieldDescriptor* field) const {
    return std::find(options_.long_fields.begin(), options_.long_fields.end(),
                     field->full_name()) != options_.long_fields.end();
  }

  const RequestCheckOptions& options_;
};

}  // namespace

bool IsValidUtf8(absl::string_view text, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // no overlong forms
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // no overlong forms
      if (c == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
    } else {
      if (bad_offset != nullptr) *bad_offset = i;
      return false;
    }
    bool ok = i + len <= n && s[i + 1] >= lo && s[i + 1] <= hi;
    for (size_t k = 2; ok && k < len; ++k) ok = s[i + k] >= 0x80 && s[i + k] <= 0xBF;
    if (!ok) {
      if (bad_offset != nullptr) *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

absl::Status ParseRequest(absl::string_view bytes, google::protobuf::Message* out,
                          const RequestCheckOptions& options) {
  const Descriptor* type = out->GetDescriptor();
  Walker walker(options);
  if (absl::Status s = walker.Message(bytes, type, "", 0); !s.ok()) return s;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !out->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request: ", bytes.size(), " bytes that are no valid ", type->full_name(), " message"));
  }
  return absl::OkStatus();
}

absl::Status ParseRequest(const grpc::ByteBuffer& buffer, google::protobuf::Message* out,
                          const RequestCheckOptions& options) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) {
    return absl::InvalidArgumentError("request: its bytes cannot be read");
  }
  if (slices.size() == 1) {
    return ParseRequest(
        absl::string_view(reinterpret_cast<const char*>(slices[0].begin()), slices[0].size()), out,
        options);
  }
  std::string bytes;
  bytes.reserve(buffer.Length());
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return ParseRequest(bytes, out, options);
}

void SerializeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* out) {
  bool own_buffer = false;
  out->Clear();  // the serializer wants an empty buffer (a stream reuses its own)
  // Serializing a message we built cannot fail short of running out of memory.
  (void)grpc::SerializationTraits<google::protobuf::Message>::Serialize(message, out, &own_buffer);
}

}  // namespace deepnet::rpc
