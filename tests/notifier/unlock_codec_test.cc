#include "lockfleet/notifier/unlock_codec.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace lockfleet::notifier {
namespace {

UnlockEvent Sample() {
  UnlockEvent e;
  e.lock = "orders:42";
  e.owner = "abc:7";
  e.client_id = "abc";
  e.fence = 17;
  e.released_at_ns = 1763712345123456789;
  e.cause = UnlockCause::kForce;
  return e;
}

TEST(UnlockCodec, RoundTrip) {
  DecodeResult r = DecodeUnlockEvent(EncodeUnlockEvent(Sample()));
  ASSERT_TRUE(r.event) << r.detail;
  EXPECT_EQ(r.event->lock, "orders:42");
  EXPECT_EQ(r.event->owner, "abc:7");
  EXPECT_EQ(r.event->client_id, "abc");
  EXPECT_EQ(r.event->fence, 17);
  EXPECT_EQ(r.event->released_at_ns, 1763712345123456789);
  EXPECT_EQ(r.event->cause, UnlockCause::kForce);
}

TEST(UnlockCodec, DocumentedFieldNames) {
  auto j = nlohmann::json::parse(EncodeUnlockEvent(Sample()));
  EXPECT_EQ(j["v"], 1);
  EXPECT_EQ(j["lock"], "orders:42");
  EXPECT_EQ(j["owner"], "abc:7");
  EXPECT_EQ(j["client"], "abc");
  EXPECT_EQ(j["fence"], 17);
  EXPECT_EQ(j["released_at_ns"], 1763712345123456789);
  EXPECT_EQ(j["cause"], "force");
}

TEST(UnlockCodec, EveryCauseRoundTrips) {
  for (UnlockCause cause : {UnlockCause::kRelease, UnlockCause::kForce,
                            UnlockCause::kOpened, UnlockCause::kPermits}) {
    UnlockEvent e = Sample();
    e.cause = cause;
    const std::string wire = EncodeUnlockEvent(e);
    EXPECT_EQ(nlohmann::json::parse(wire)["cause"], UnlockCauseName(cause));
    DecodeResult r = DecodeUnlockEvent(wire);
    ASSERT_TRUE(r.event) << wire;
    EXPECT_EQ(r.event->cause, cause);
  }
  EXPECT_EQ(std::string(UnlockCauseName(UnlockCause::kOpened)), "opened");
  EXPECT_EQ(std::string(UnlockCauseName(UnlockCause::kPermits)), "permits");
}

TEST(UnlockCodec, BinaryNamesTravelHexEncoded) {
  UnlockEvent e = Sample();
  e.lock = std::string("a\0\xff\xc0\x80{}", 7);
  std::string wire = EncodeUnlockEvent(e);
  auto j = nlohmann::json::parse(wire);
  EXPECT_FALSE(j.contains("lock"));
  EXPECT_EQ(j["lock_hex"], "6100ffc0807b7d");
  DecodeResult r = DecodeUnlockEvent(wire);
  ASSERT_TRUE(r.event);
  EXPECT_EQ(r.event->lock, e.lock);
}

TEST(UnlockCodec, UnicodeNamesStayReadable) {
  UnlockEvent e = Sample();
  e.lock = "bestellung:ä€😀";
  auto j = nlohmann::json::parse(EncodeUnlockEvent(e));
  EXPECT_EQ(j["lock"], e.lock);
}

TEST(UnlockCodec, UnknownFieldsAreIgnored) {
  DecodeResult r = DecodeUnlockEvent(
      R"({"v":1,"lock":"x","future":[1,2],"cause":"release"})");
  ASSERT_TRUE(r.event);
  EXPECT_EQ(r.event->lock, "x");
}

TEST(UnlockCodec, MalformedRecordsAreClassified) {
  struct Case {
    std::string value;
    DecodeError error;
  };
  std::vector<Case> cases{
      {"", DecodeError::kNotJson},
      {"not json at all", DecodeError::kNotJson},
      {"{\"v\":1,\"lock\":", DecodeError::kNotJson},
      {std::string("\xff\xfe\x00garbage", 10), DecodeError::kNotJson},
      {"[1,2,3]", DecodeError::kNotObject},
      {"\"just a string\"", DecodeError::kNotObject},
      {R"({"lock":"x"})", DecodeError::kWrongVersion},
      {R"({"v":2,"lock":"x"})", DecodeError::kWrongVersion},
      {R"({"v":"1","lock":"x"})", DecodeError::kWrongVersion},
      {R"({"v":1})", DecodeError::kMissingField},
      {R"({"v":1,"lock":""})", DecodeError::kBadField},
      {R"({"v":1,"lock":42})", DecodeError::kBadField},
      {R"({"v":1,"lock_hex":"zz"})", DecodeError::kBadField},
      {R"({"v":1,"lock":"x","fence":"7"})", DecodeError::kBadField},
      {R"({"v":1,"lock":"x","cause":"meteor"})", DecodeError::kBadField},
      {std::string(kMaxUnlockEventBytes + 1, ' '), DecodeError::kTooLarge},
      {std::string(10000, '['), DecodeError::kNotJson},  // deep nesting
  };
  for (const Case& c : cases) {
    DecodeResult r = DecodeUnlockEvent(c.value);
    EXPECT_FALSE(r.event) << c.value.substr(0, 40);
    EXPECT_EQ(r.error, c.error)
        << c.value.substr(0, 40) << " -> " << DecodeErrorName(r.error);
    EXPECT_FALSE(r.detail.empty());
  }
}

}  // namespace
}  // namespace lockfleet::notifier
