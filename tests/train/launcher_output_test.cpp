// The launcher's standard error is passed on line by line, less Open MPI's shared-memory noise
// when a rank dies (launch/launcher_output.h); nothing else is dropped or reordered.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "launch/launcher_output.h"

TEST_CASE("Open MPI's read errors of a dead peer are the only lines dropped") {
  CHECK(sg::is_launcher_noise("[vm:12982] Read -1, expected 793088, errno = 3\n"));
  CHECK(sg::is_launcher_noise("Read -1, expected 16, errno = 14\n"));
  CHECK_FALSE(sg::is_launcher_noise("rank 1: error: this process crashed (SIGABRT)\n"));
  CHECK_FALSE(sg::is_launcher_noise("error: Read -1, expected 793088, errno = 3 in my file\n"));
  CHECK_FALSE(sg::is_launcher_noise("step 10 loss 3.2\n"));
}

TEST_CASE("the launcher's lines reach standard error in order, the noise left out") {
  // Standard error goes to a pipe here, read back after the child has written through the
  // filter as a launcher would.
  int captured[2];
  REQUIRE(pipe(captured) == 0);
  const int saved = dup(STDERR_FILENO);
  dup2(captured[1], STDERR_FILENO);
  {
    sg::LauncherOutput output;
    REQUIRE(output.write_fd() >= 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      dup2(output.write_fd(), STDERR_FILENO);
      std::fputs("first line\n[vm:1] Read -1, expected 793088, errno = 3\nsecond ", stderr);
      std::fflush(stderr);
      usleep(50000);
      std::fputs("line\nno newline at the end", stderr);
      std::fflush(stderr);
      _exit(0);
    }
    output.start();
    int status = 0;
    waitpid(child, &status, 0);
    output.finish();
  }
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(captured[1]);
  std::string text;
  char buffer[256];
  for (ssize_t n; (n = read(captured[0], buffer, sizeof(buffer))) > 0;) text.append(buffer, n);
  close(captured[0]);
  CHECK(text == "first line\nsecond line\nno newline at the end");
}
