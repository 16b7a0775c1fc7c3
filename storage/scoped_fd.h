#pragma once

// A file descriptor closed when it goes out of scope: the one owner of an open() for the
// storage readers (guarded_read.cc), the checkpoint reader, the folder lock and the job store's
// id mark. Movable; a moved-from one holds -1.

#include <unistd.h>

namespace deepnet::storage {

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ScopedFd& operator=(ScopedFd&&) = delete;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace deepnet::storage
