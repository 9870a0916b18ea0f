// The configuration layer: byte counts as every size variable and gnio-perf's -b/-e take them,
// and typed reads that name the variable when its value does not parse.
#include "gnio/config.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <string>

#include "gnio/error.hpp"

namespace {

TEST(ParseByteCount, AcceptsPlainSuffixedAndBinaryForms) {
  EXPECT_EQ(gnio::parse_byte_count("0"), 0u);
  EXPECT_EQ(gnio::parse_byte_count("8"), 8u);
  EXPECT_EQ(gnio::parse_byte_count("4096B"), 4096u);
  EXPECT_EQ(gnio::parse_byte_count("64K"), 64u << 10);
  EXPECT_EQ(gnio::parse_byte_count("64k"), 64u << 10);
  EXPECT_EQ(gnio::parse_byte_count("64KiB"), 64u << 10);
  EXPECT_EQ(gnio::parse_byte_count("64KB"), 64u << 10);
  EXPECT_EQ(gnio::parse_byte_count("3M"), 3u << 20);
  EXPECT_EQ(gnio::parse_byte_count("2G"), std::uint64_t{2} << 30);
  EXPECT_EQ(gnio::parse_byte_count("1T"), std::uint64_t{1} << 40);
  EXPECT_EQ(gnio::parse_byte_count("18446744073709551615"), ~std::uint64_t{0});
  EXPECT_EQ(gnio::parse_byte_count("16777215T"), std::uint64_t{16777215} << 40);
}

TEST(ParseByteCount, RejectsEverythingElse) {
  for (const char* bad : {"", "K", "-1", "+1", " 1", "1 ", "1.5M", "1X", "1KiBB", "1iB", "0x10",
                          "18446744073709551616", "16777216T", "1MM"})
    EXPECT_FALSE(gnio::parse_byte_count(bad).has_value()) << "'" << bad << "'";
}

TEST(Config, SizeVariableNamesItselfWhenItDoesNotParse) {
  ::setenv("GNIO_COLL_SCRATCH", "lots", 1);
  try {
    (void)gnio::config_size("GNIO_COLL_SCRATCH");
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), gnio::ErrorClass::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("GNIO_COLL_SCRATCH"), std::string::npos) << e.what();
  }
  ::setenv("GNIO_COLL_SCRATCH", "16MiB", 1);
  EXPECT_EQ(gnio::config_size("GNIO_COLL_SCRATCH"), 16u << 20);
  ::unsetenv("GNIO_COLL_SCRATCH");
  EXPECT_EQ(gnio::config_size("GNIO_COLL_SCRATCH"), 8u << 20);  // the table's default, 8M
}

}  // namespace
