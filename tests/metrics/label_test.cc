// Lock classes: how unbounded lock names become a bounded label set.
#include <gtest/gtest.h>

#include <string>

#include "exposition.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/metrics/metrics.h"

namespace lockfleet::metrics::testing {
namespace {

using std::chrono::milliseconds;

void AcquireOnce(LockObserver& observer, const std::string& name) {
  observer.OnAcquire(name, AcquireStatus::kAcquired, milliseconds(1), 1, false);
}

double Acquired(const Metrics& m, const std::string& lock_class) {
  return Value(
      m, "lockfleet_lock_acquisitions_total",
      {{"kind", "lock"}, {"lock_class", lock_class}, {"result", "acquired"}});
}

TEST(LockClass, IsTheNameUpToTheFirstColon) {
  EXPECT_EQ(LockClass("product:12345"), "product");
  EXPECT_EQ(LockClass("a:b:c"), "a");
}

TEST(LockClass, IsTheWholeNameWithoutAColon) {
  EXPECT_EQ(LockClass("jobs"), "jobs");
}

TEST(LockClass, OfAnEmptyPrefixIsNone) {
  EXPECT_EQ(LockClass(":42"), "none");
  EXPECT_EQ(LockClass(""), "none");
}

TEST(LockClass, IsCutTo64Bytes) {
  EXPECT_EQ(LockClass(std::string(100, 'a')), std::string(64, 'a'));
}

TEST(LockClass, IsNeverCutInsideAUtf8Character) {
  std::string euros;  // U+20AC is 3 bytes: 21 fit in 64 bytes, not 22
  for (int i = 0; i < 30; ++i) euros += "\xE2\x82\xAC";
  EXPECT_EQ(LockClass(euros), euros.substr(0, 63));
}

TEST(LockClass, ReplacesInvalidUtf8AndControlCharacters) {
  EXPECT_EQ(LockClass("a\xFF\xC3(b\x01\n:x"), "a__(b__");
  EXPECT_EQ(LockClass("caf\xC3\xA9:1"), "caf\xC3\xA9");  // valid UTF-8 stays
}

TEST(LockClassBound, TheHundredAndFirstClassCountsAsOther) {
  Metrics m;
  auto observer = m.lock_observer();
  for (int i = 0; i < 100; ++i) AcquireOnce(*observer, "c" + std::to_string(i));
  AcquireOnce(*observer, "c100:x");
  AcquireOnce(*observer, "c101:y");

  EXPECT_EQ(Acquired(m, "c99"), 1);
  EXPECT_EQ(Acquired(m, "other"), 2);
  EXPECT_TRUE(std::isnan(Acquired(m, "c100")));
}

TEST(LockClassBound, ClassesSeenBeforeTheBoundKeepTheirSeries) {
  Metrics m({.max_lock_classes = 1});
  auto observer = m.lock_observer();
  AcquireOnce(*observer, "first:1");
  AcquireOnce(*observer, "second:1");
  AcquireOnce(*observer, "first:2");

  EXPECT_EQ(Acquired(m, "first"), 2);
  EXPECT_EQ(Acquired(m, "other"), 1);
}

TEST(LockClassBound, ZeroCountsEverythingAsOther) {
  Metrics m({.max_lock_classes = 0});
  AcquireOnce(*m.lock_observer(), "a:1");
  EXPECT_EQ(Acquired(m, "other"), 1);
}

TEST(LockClassBound, ACustomClassFunctionIsUsedAndItsResultSanitized) {
  Metrics m({.lock_class = [](std::string_view name) {
    return std::string(name.substr(0, 2)) + "\x01";
  }});
  AcquireOnce(*m.lock_observer(), "abcdef");
  EXPECT_EQ(Acquired(m, "ab_"), 1);
}

}  // namespace
}  // namespace lockfleet::metrics::testing
