// The flight recorder seen from outside the job: flight_test runs gnio-run on flight_probe (3
// ranks, rank 2 skips the 4th allreduce, GNIO_TIMEOUT=3) and checks that
//  * ranks 0 and 1 fail in the allreduce (Timeout, or RemoteError when the other one died
//    first) and rank 2 learns of their loss (RemoteError);
//  * every rank wrote its dump to GNIO_FLIGHT_RECORDER_DIR, although the ring (8 entries) wrapped;
//  * gnio-flight names rank 2 as behind on the collective channel, missing call #4 (the
//    allreduce, with its count, type and operator), and nobody else, and exits 1.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "common/job.hpp"

namespace {

std::vector<std::string> dumps_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("gnio-flight-", 0) == 0 && name.size() > 5 &&
          name.compare(name.size() - 5, 5, ".json") == 0)
        names.push_back(name);
    }
    ::closedir(d);
  }
  return names;
}

/// Runs `command`, returning its exit status and (in `out`) what it printed.
int run(const std::string& command, std::string* out) {
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(FlightRecorder, ToolNamesTheRankThatSkippedACollective) {
  char dir_template[] = "/tmp/gnio-flight-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  gnio_test::Job job(
      GNIO_RUN_EXE, {"-n", "3", "--grace", "60", "--timeout", "150", "--", FLIGHT_PROBE_EXE, "2"},
      {"GNIO_BACKEND=host", "GNIO_TIMEOUT=3", "GNIO_BOOTSTRAP_TIMEOUT=30", "GNIO_HEAP_SIZE=16M",
       "GNIO_FLIGHT_RECORDER=8", "GNIO_FLIGHT_RECORDER_DIR=" + dir});
  job.finish(200);
  const std::string all = "stdout:\n" + job.out + "\nstderr:\n" + job.err;
  EXPECT_EQ(job.err.find("ThreadSanitizer"), std::string::npos) << all;
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(std::regex_search(
        job.out, std::regex("FLIGHT rank=" + std::to_string(r) + " class=(Timeout|RemoteError)")))
        << all;
  EXPECT_NE(job.out.find("FLIGHT rank=2 class=RemoteError"), std::string::npos) << all;
  EXPECT_NE(job.err.find("flight recorder"), std::string::npos) << all;  // the log pointer

  const std::vector<std::string> names = dumps_in(dir);
  ASSERT_EQ(names.size(), 3u) << all;
  for (int r = 0; r < 3; ++r) {
    bool found = false;
    for (const std::string& n : names)
      found |= n.size() > 5 && n.find("-rank" + std::to_string(r) + ".json") != std::string::npos;
    EXPECT_TRUE(found) << "no dump of rank " << r << "\n" << all;
  }

  std::string tool_out;
  const int status = run(std::string(PYTHON3_EXE) + " " + GNIO_FLIGHT_TOOL + " " + dir, &tool_out);
  EXPECT_EQ(status, 1) << tool_out;
  EXPECT_TRUE(std::regex_search(
      tool_out, std::regex("rank 2 is behind: last #3, missing #4: allreduce count=1000 "
                           "type=i32 op=sum")))
      << tool_out;
  EXPECT_EQ(tool_out.find("rank 0 is behind"), std::string::npos) << tool_out;
  EXPECT_EQ(tool_out.find("rank 1 is behind"), std::string::npos) << tool_out;
  EXPECT_NE(tool_out.find("host operations: every rank at #1"), std::string::npos) << tool_out;

  for (const std::string& n : names) std::remove((dir + "/" + n).c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
