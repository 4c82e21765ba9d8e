#pragma once
// For tests of code that must not block on a FIFO: runs the code on a thread and, if it has not
// returned after a few seconds (it is stuck opening the FIFO, as fopen or ifstream would be),
// opens the FIFO for writing and closes it again, which ends a blocked open (the read after it
// sees end of file). So the old, blocking behaviour fails the test instead of hanging it.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

namespace sg::test {

// true when f returned within `seconds` on its own.
inline bool returns_without_blocking(const std::string& fifo, const std::function<void()>& f,
                                     double seconds = 5.0) {
  std::packaged_task<void()> task(f);
  std::future<void> done = task.get_future();
  std::thread thread(std::move(task));
  const bool in_time =
      done.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready;
  while (done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // fails while no reader waits
    if (fd >= 0) ::close(fd);
  }
  thread.join();
  done.get();  // rethrows what f threw
  return in_time;
}

}  // namespace sg::test
