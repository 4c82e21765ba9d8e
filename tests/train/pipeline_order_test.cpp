// The order of a pipeline stage's forwards and backwards (pipeline_program, which
// PipelineRunner::train executes). A wrong order can leave every number alone while the stages
// stop overlapping (one warm-up forward too few), so the schedule's promises are checked here.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "parallel/pipeline_schedule.h"

namespace {

struct Shape {
  int forwards_before_first_backward = 0;
  int most_in_flight = 0;  // micro-batches forwarded and not yet backwarded
};

// Checks what holds for every schedule and returns the program's shape.
Shape check_program(const std::vector<sg::PipelineOp>& program, int M) {
  Shape shape;
  std::vector<int> forwarded(static_cast<size_t>(M), 0), backwarded(static_cast<size_t>(M), 0);
  int in_flight = 0, next_backward = 0;
  bool seen_backward = false;
  for (const sg::PipelineOp& op : program) {
    REQUIRE(op.micro >= 0);
    REQUIRE(op.micro < M);
    if (op.forward) {
      CHECK(forwarded[static_cast<size_t>(op.micro)]++ == 0);
      if (!seen_backward) ++shape.forwards_before_first_backward;
      shape.most_in_flight = std::max(shape.most_in_flight, ++in_flight);
    } else {
      seen_backward = true;
      CHECK(forwarded[static_cast<size_t>(op.micro)] == 1);  // its forward came first
      CHECK(backwarded[static_cast<size_t>(op.micro)]++ == 0);
      CHECK(op.micro == next_backward++);  // backwards in micro-batch order: the same sums
      --in_flight;
    }
  }
  CHECK(next_backward == M);
  CHECK(std::count(forwarded.begin(), forwarded.end(), 1) == M);
  return shape;
}

}  // namespace

TEST_CASE("1f1b: stage s of S runs S-s-1 warm-up forwards; in flight never above its slots") {
  for (int S = 1; S <= 6; ++S) {
    for (int s = 0; s < S; ++s) {
      for (int M = 1; M <= 10; ++M) {
        CAPTURE(S);
        CAPTURE(s);
        CAPTURE(M);
        const auto program = sg::pipeline_program(sg::PipelineSchedule::OneFOneB, s, S, M);
        const Shape shape = check_program(program, M);
        const int slots = sg::pipeline_slots(sg::PipelineSchedule::OneFOneB, s, S, M);
        // S-s-1 warm-up forwards, then the steady state's first forward before its backward.
        CHECK(shape.forwards_before_first_backward == std::min(S - s, M));
        // As many in flight as the stage has slots: fewer and the stages stop overlapping.
        CHECK(shape.most_in_flight == slots);
        CHECK(slots == std::min(S - s, M));
        // After the warm-up, forwards and backwards alternate until the forwards run out.
        const int warmup = std::min(S - s - 1, M);
        for (size_t i = static_cast<size_t>(warmup); i + 1 < program.size(); i += 2) {
          if (program[i].forward) CHECK_FALSE(program[i + 1].forward);
        }
      }
    }
  }
}

TEST_CASE("gpipe: every forward, then every backward; one stage alternates") {
  for (int S = 2; S <= 4; ++S) {
    for (int M = 1; M <= 8; ++M) {
      CAPTURE(S);
      CAPTURE(M);
      const Shape shape = check_program(sg::pipeline_program(sg::PipelineSchedule::GPipe, 1, S, M), M);
      CHECK(shape.forwards_before_first_backward == M);
      CHECK(shape.most_in_flight == sg::pipeline_slots(sg::PipelineSchedule::GPipe, 1, S, M));
    }
  }
  for (sg::PipelineSchedule schedule : {sg::PipelineSchedule::GPipe, sg::PipelineSchedule::OneFOneB}) {
    const auto program = sg::pipeline_program(schedule, 0, 1, 3);
    const std::vector<sg::PipelineOp> alternating = {{true, 0}, {false, 0}, {true, 1},
                                                     {false, 1}, {true, 2}, {false, 2}};
    CHECK(program == alternating);
    CHECK(sg::pipeline_slots(schedule, 0, 1, 3) == 1);
  }
}
