#include "launch/launcher_output.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <regex>

namespace sg {
namespace {

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

bool is_launcher_noise(const std::string& line) {
  // Open MPI's vader BTL (btl_vader_get.c) when process_vm_readv fails on a dead peer.
  static const std::regex cma_read(R"(^(\[[^\]]*\] )?Read -?\d+, expected \d+, errno = \d+\s*$)");
  return std::regex_match(line, cma_read);
}

LauncherOutput::LauncherOutput() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) == 0) {
    read_fd_ = fds[0];
    write_fd_ = fds[1];
  }
  if (pipe2(stop_fds_, O_CLOEXEC) != 0) stop_fds_[0] = stop_fds_[1] = -1;
}

LauncherOutput::~LauncherOutput() {
  finish();
  for (const int fd : {read_fd_, write_fd_, stop_fds_[0], stop_fds_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void LauncherOutput::start() {
  if (write_fd_ >= 0) {
    close(write_fd_);
    write_fd_ = -1;
  }
  if (read_fd_ >= 0 && stop_fds_[0] >= 0) thread_ = std::thread(&LauncherOutput::pass_on, this);
}

void LauncherOutput::finish() {
  if (!thread_.joinable()) return;
  const char stop = 1;
  write_all(stop_fds_[1], &stop, 1);
  thread_.join();
}

void LauncherOutput::pass_on() {
  std::string pending;
  char buffer[4096];
  bool stopping = false;
  auto deadline = std::chrono::steady_clock::time_point::max();
  auto flush_line = [&](const std::string& line) {
    if (!is_launcher_noise(line)) write_all(STDERR_FILENO, line.data(), line.size());
  };
  for (;;) {
    pollfd fds[2] = {{read_fd_, POLLIN, 0}, {stop_fds_[0], POLLIN, 0}};
    const int ready = poll(fds, stopping ? 1 : 2, stopping ? 100 : -1);
    if (ready < 0) continue;
    if (!stopping && (fds[1].revents & POLLIN) != 0) {
      stopping = true;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    if (stopping && std::chrono::steady_clock::now() >= deadline) break;
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const ssize_t n = read(read_fd_, buffer, sizeof(buffer));
    if (n <= 0) break;  // every writer has closed it
    pending.append(buffer, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t end; (end = pending.find('\n', start)) != std::string::npos; start = end + 1) {
      flush_line(pending.substr(start, end + 1 - start));
    }
    pending.erase(0, start);
  }
  if (!pending.empty()) flush_line(pending);
}

}  // namespace sg
