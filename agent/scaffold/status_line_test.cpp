// The status line's text: attempts done of the total, what is in flight by
// phase, the elapsed time and ETA, the cost so far. Drawing is off here (not
// a terminal), so nothing reaches stderr.
#include "agent/scaffold/status_line.h"

#include <gtest/gtest.h>

#include <sstream>

namespace kloop {
namespace {

TEST(StatusLineTest, SaysWhatIsInFlightAndWhatIsDone) {
  StatusLine line(10, /*enabled=*/false);
  line.begin("model");
  line.begin("model");
  line.begin("eval");
  EXPECT_EQ(line.text().rfind("[0/10] in flight: 2 waiting for the model, 1 evaluating | ", 0), 0u) << line.text();
  line.end("model");
  line.begin("compile");
  line.done(0.25);
  const std::string t = line.text();
  EXPECT_EQ(t.rfind("[1/10] in flight: 1 waiting for the model, 1 compiling, 1 evaluating | ", 0), 0u) << t;
  EXPECT_NE(t.find("elapsed, ETA "), std::string::npos) << t;
  EXPECT_NE(t.find("| $0.2500"), std::string::npos) << t;
  line.end("model");
  line.end("compile");
  line.end("eval");
  EXPECT_EQ(line.text().find("in flight"), std::string::npos) << line.text();
  std::ostringstream out;
  line.print(out, "[1/10] 19_ReLU sample 0 turn 1: correct\n");
  EXPECT_EQ(out.str(), "[1/10] 19_ReLU sample 0 turn 1: correct\n");
}

}  // namespace
}  // namespace kloop
