// EventAuthenticator: signed unlock events round-trip; every change to a
// signed event, an unsigned event and a wrong key are refused; keys never
// show in messages.
#include "lockfleet/notifier/event_auth.h"

#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/notifier/unlock_codec.h"

namespace lockfleet::notifier {
namespace {

using nlohmann::json;

const std::string kKey = "0123456789abcdef-test-key";
const std::string kOtherKey = "fedcba9876543210-other-key";

// A fair hand-off event: every field set.
UnlockEvent HandOff() {
  UnlockEvent e;
  e.lock = "orders:42";
  e.owner = "abc:7";
  e.client_id = "abc";
  e.fence = 17;
  e.released_at_ns = 1763712345123456789;
  e.cause = UnlockCause::kForce;
  e.next_waiter = "w1";
  e.next_owner = "def:9";
  e.next_fence = 18;
  return e;
}

bool Same(const UnlockEvent& a, const UnlockEvent& b) {
  return a.lock == b.lock && a.owner == b.owner && a.client_id == b.client_id &&
         a.fence == b.fence && a.released_at_ns == b.released_at_ns &&
         a.cause == b.cause && a.next_waiter == b.next_waiter &&
         a.next_owner == b.next_owner && a.next_fence == b.next_fence;
}

// The error Decode reports for `value` (kNone: accepted), checking that a
// refused record carries no event and a detail free of every key.
DecodeError Check(const EventAuthenticator& auth, const std::string& value) {
  const DecodeResult r = auth.Decode(value);
  EXPECT_EQ(r.event.has_value(), r.error == DecodeError::kNone) << value;
  for (const std::string& key : {kKey, kOtherKey}) {
    EXPECT_EQ(r.detail.find(key), std::string::npos) << r.detail;
  }
  if (r.error != DecodeError::kNone) {
    EXPECT_FALSE(r.detail.empty());
  }
  return r.error;
}

// The signed encoding of `event`, changed by `edit` and re-serialized.
std::string Edited(const EventAuthenticator& auth, const UnlockEvent& event,
                   const std::function<void(json&)>& edit) {
  json j = json::parse(auth.Encode(event));
  edit(j);
  return j.dump();
}

TEST(EventAuth, KnownAnswer) {
  // Computed independently (Python's hmac over the documented layout), so a
  // change to the canonical bytes cannot go unnoticed: it would split a
  // fleet running two versions.
  const EventAuthenticator auth({kKey});
  EXPECT_EQ(auth.Sign(HandOff()),
            "hmac-sha256-v1:"
            "5d1b7340e3aff0c6db0968a0415fdba60391ad333bd59762863b370035cbd29e");
}

TEST(EventAuth, TheDocumentedExampleVerifies) {
  // docs/unlock-events.md, "Record".
  const std::string example =
      R"({"v":1,"lock":"orders:42","owner":"3f9c0d5e1a2b4c6d:7",)"
      R"("client":"3f9c0d5e1a2b4c6d","fence":17,)"
      R"("released_at_ns":1763712345123456789,"cause":"release",)"
      R"("sig":"hmac-sha256-v1:)"
      R"(fdc09cf628dc2d25d0258b851b72353aab3b18d985a91d8820f83008a9fddde1"})";
  EXPECT_EQ(Check(EventAuthenticator({kKey}), example), DecodeError::kNone);
  EXPECT_EQ(Check(EventAuthenticator({kOtherKey}), example),
            DecodeError::kBadSignature);
}

TEST(EventAuth, SignedEventsRoundTrip) {
  const EventAuthenticator auth({kKey});
  UnlockEvent plain = HandOff();
  plain.next_waiter.clear();
  plain.next_owner.clear();
  plain.next_fence = 0;
  UnlockEvent binary = HandOff();
  binary.lock = std::string("a\0\xff{}", 5);  // travels as lock_hex
  binary.owner = std::string("\xc0\x80", 2);
  for (const UnlockEvent& event : {HandOff(), plain, binary}) {
    const std::string wire = auth.Encode(event);
    EXPECT_TRUE(json::parse(wire)["sig"].get<std::string>().starts_with(
        kSignaturePrefix));
    const DecodeResult r = auth.Decode(wire);
    ASSERT_TRUE(r.event) << r.detail;
    EXPECT_TRUE(Same(*r.event, event));
  }
}

TEST(EventAuth, SignsWhatTheEncoderCarries) {
  // next_owner / next_fence without a next_waiter are not sent; the
  // signature must not cover them either.
  const EventAuthenticator auth({kKey});
  UnlockEvent event = HandOff();
  event.next_waiter.clear();
  EXPECT_EQ(Check(auth, auth.Encode(event)), DecodeError::kNone);
}

TEST(EventAuth, ChangingAnyFieldBreaksTheSignature) {
  const EventAuthenticator auth({kKey});
  const std::vector<std::pair<std::string, std::function<void(json&)>>> edits{
      {"lock", [](json& j) { j["lock"] = "orders:43"; }},
      {"owner", [](json& j) { j["owner"] = "abc:8"; }},
      {"client", [](json& j) { j["client"] = "evil"; }},
      {"fence", [](json& j) { j["fence"] = 16; }},
      {"released_at_ns", [](json& j) { j["released_at_ns"] = 1; }},
      {"cause", [](json& j) { j["cause"] = "release"; }},
      {"next_waiter", [](json& j) { j["next_waiter"] = "w2"; }},
      {"next_owner", [](json& j) { j["next_owner"] = "def:10"; }},
      {"next_fence", [](json& j) { j["next_fence"] = 19; }},
      // Leaving a field out gives it its default: a different event.
      {"no cause", [](json& j) { j.erase("cause"); }},
      {"no fence", [](json& j) { j.erase("fence"); }},
      {"no next_waiter", [](json& j) { j.erase("next_waiter"); }},
      {"no client", [](json& j) { j.erase("client"); }},
      // The same bytes moved from one field to its neighbour.
      {"shifted",
       [](json& j) {
         j["lock"] = "orders:42a";
         j["owner"] = "bc:7";
       }},
  };
  for (const auto& [what, edit] : edits) {
    EXPECT_EQ(Check(auth, Edited(auth, HandOff(), edit)),
              DecodeError::kBadSignature)
        << what;
  }
  // A field added to an event that had none.
  UnlockEvent plain = HandOff();
  plain.next_waiter.clear();
  EXPECT_EQ(Check(auth, Edited(auth, plain,
                               [](json& j) { j["next_waiter"] = "w1"; })),
            DecodeError::kBadSignature);
  // The version is checked before the signature.
  EXPECT_EQ(Check(auth, Edited(auth, HandOff(), [](json& j) { j["v"] = 2; })),
            DecodeError::kWrongVersion);
}

TEST(EventAuth, TheSignatureCoversMeaningNotSpelling) {
  // "lock" and "lock_hex" with the same bytes, or unknown extra fields, are
  // the same event to every receiver: still authentic.
  const EventAuthenticator auth({kKey});
  EXPECT_EQ(Check(auth, Edited(auth, HandOff(),
                               [](json& j) {
                                 j.erase("lock");
                                 j["lock_hex"] = "6f72646572733a3432";
                                 j["future"] = {1, 2};
                               })),
            DecodeError::kNone);
}

TEST(EventAuth, UnsignedEventsAreRefusedWhenAKeyIsSet) {
  const EventAuthenticator auth({kKey});
  EXPECT_EQ(Check(auth, EncodeUnlockEvent(HandOff())), DecodeError::kUnsigned);
  EXPECT_EQ(Check(auth, R"({"v":1,"lock":"orders:42","cause":"force"})"),
            DecodeError::kUnsigned);
  EXPECT_EQ(Check(auth, R"({"v":1,"lock":"orders:42","sig":""})"),
            DecodeError::kUnsigned);
}

TEST(EventAuth, WrongKeyIsRefused) {
  const EventAuthenticator signer({kOtherKey});
  const EventAuthenticator receiver({kKey});
  EXPECT_EQ(Check(receiver, signer.Encode(HandOff())),
            DecodeError::kBadSignature);
}

TEST(EventAuth, MalformedSignaturesAreRefused) {
  const EventAuthenticator auth({kKey});
  const std::string good = auth.Sign(HandOff());
  std::string flipped = good;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  std::string upper = good;
  for (size_t i = kSignaturePrefix.size(); i < upper.size(); ++i) {
    upper[i] = static_cast<char>(std::toupper(upper[i]));
  }
  const std::vector<std::string> bad{
      flipped,
      good.substr(0, good.size() - 2),
      good + "00",
      "hmac-sha256-v2:" + good.substr(kSignaturePrefix.size()),
      good.substr(kSignaturePrefix.size()),
      std::string(kSignaturePrefix) + std::string(64, 'g'),
      "x",
  };
  for (const std::string& sig : bad) {
    EXPECT_EQ(Check(auth, EncodeUnlockEvent(HandOff(), sig)),
              DecodeError::kBadSignature)
        << sig;
  }
  EXPECT_EQ(Check(auth, EncodeUnlockEvent(HandOff(), upper)),
            DecodeError::kNone)
      << "hex digits in either case";
  EXPECT_EQ(Check(auth, Edited(auth, HandOff(), [](json& j) { j["sig"] = 7; })),
            DecodeError::kBadField);
}

TEST(EventAuth, RotationSignsWithTheFirstKeyAndAcceptsEveryKey) {
  const EventAuthenticator old_only({kKey});
  const EventAuthenticator both_old_first({kKey, kOtherKey});
  const EventAuthenticator both_new_first({kOtherKey, kKey});
  const EventAuthenticator new_only({kOtherKey});
  const std::string by_old = old_only.Encode(HandOff());
  const std::string by_new = both_new_first.Encode(HandOff());
  EXPECT_EQ(both_old_first.Encode(HandOff()), by_old);
  for (const EventAuthenticator* receiver :
       {&old_only, &both_old_first, &both_new_first}) {
    EXPECT_EQ(Check(*receiver, by_old), DecodeError::kNone);
  }
  for (const EventAuthenticator* receiver :
       {&both_old_first, &both_new_first, &new_only}) {
    EXPECT_EQ(Check(*receiver, by_new), DecodeError::kNone);
  }
  EXPECT_EQ(Check(old_only, by_new), DecodeError::kBadSignature);
  EXPECT_EQ(Check(new_only, by_old), DecodeError::kBadSignature);
}

TEST(EventAuth, WithoutAKeyNothingIsSignedAndSignaturesAreIgnored) {
  const EventAuthenticator none;
  EXPECT_FALSE(none.enabled());
  EXPECT_EQ(none.Sign(HandOff()), "");
  EXPECT_FALSE(json::parse(none.Encode(HandOff())).contains("sig"));
  EXPECT_EQ(Check(none, EncodeUnlockEvent(HandOff())), DecodeError::kNone);
  EXPECT_EQ(Check(none, EventAuthenticator({kKey}).Encode(HandOff())),
            DecodeError::kNone);
  EXPECT_EQ(Check(none, EncodeUnlockEvent(HandOff(), "not a signature")),
            DecodeError::kNone);
}

TEST(EventAuth, ShortKeysAreRefusedWithoutShowingThem) {
  const std::string short_key = "fifteen-bytes!!";
  ASSERT_EQ(short_key.size(), kMinEventKeyBytes - 1);
  for (const std::vector<std::string>& keys :
       {std::vector<std::string>{short_key},
        std::vector<std::string>{kKey, short_key},
        {""}}) {
    try {
      EventAuthenticator auth(keys);
      ADD_FAILURE() << "accepted a short key";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      const std::string what = e.what();
      EXPECT_NE(what.find("at least 16"), std::string::npos) << what;
      EXPECT_EQ(what.find(short_key), std::string::npos) << what;
      EXPECT_EQ(what.find(kKey), std::string::npos) << what;
    }
  }
  try {
    EventAuthenticator auth({kKey, short_key});
    ADD_FAILURE() << "accepted a short second key";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("event key 2 has 15 bytes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(EventAuthenticator({std::string(kMinEventKeyBytes, 'k')}));
}

TEST(EventAuth, CanonicalBytesTellEveryEventApart) {
  UnlockEvent a = HandOff();
  a.lock = "ab";
  a.owner = "c";
  UnlockEvent b = HandOff();
  b.lock = "a";
  b.owner = "bc";
  EXPECT_NE(CanonicalUnlockEvent(a), CanonicalUnlockEvent(b));
  UnlockEvent c = HandOff();
  c.next_waiter = "";
  c.next_owner = "w1";
  UnlockEvent d = HandOff();
  d.next_waiter = "w1";
  d.next_owner = "";
  EXPECT_NE(CanonicalUnlockEvent(c), CanonicalUnlockEvent(d));
  const std::string bytes = CanonicalUnlockEvent(HandOff());
  EXPECT_TRUE(bytes.starts_with(
      std::string("lockfleet.unlock-event.hmac-sha256.v1\0", 38)));
}

}  // namespace
}  // namespace lockfleet::notifier
