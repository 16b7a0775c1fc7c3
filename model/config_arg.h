#pragma once

#include <utility>

/// Declares a configuration field `name` of type `T` with a getter and a chainable setter, the
/// same interface as LibTorch's TORCH_ARG but without LibTorch, so that option structs such as
/// model::DeepNetConfig can be used by code that never links LibTorch (the coordinator):
///   T& name();  const T& name() const;  Self& name(const T&);  Self& name(T&&);
/// The field itself is private (`name_`), and the macro leaves the access level at private, so
/// put it after the struct's public members. Default values follow the macro, as in
///   DEEPNET_CONFIG_ARG(int64_t, heads) = 8;
#define DEEPNET_CONFIG_ARG(T, name)                      \
 public:                                                 \
  auto name(const T& new_value)->decltype(*this) {       \
    this->name##_ = new_value;                           \
    return *this;                                        \
  }                                                      \
  auto name(T&& new_value)->decltype(*this) {            \
    this->name##_ = std::move(new_value);                \
    return *this;                                        \
  }                                                      \
  const T& name() const noexcept { return this->name##_; } \
  T& name() noexcept { return this->name##_; }           \
                                                         \
 private:                                                \
  T name##_
