#pragma once

// A file descriptor closed when it goes out of scope: the storage readers' (guarded_read.cc)
// and the checkpoint reader's one owner of an open().

#include <unistd.h>

namespace deepnet::storage {

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace deepnet::storage
