// FencedResource's key layout: the key determines the prefix, the resource
// name and every part (a randomized property test), its hash tag is exactly
// the encoded name, and ordinary names and parts keep their old keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/fenced_resource.h"

namespace lockfleet::testing {
namespace {

using namespace std::string_literals;

// Redis Cluster's rule: the bytes between the first '{' and the first '}'
// after it, if that is not empty; otherwise the whole key.
std::string_view HashTag(std::string_view key) {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

// Short strings over the bytes that matter: the escaped ones, '%' followed
// by hex digits (what an escape looks like), NUL, 0xFF and a few letters.
class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  std::string Text(size_t max_len) {
    static const std::vector<std::string> kPieces = {
        "{",   "}",   ":", "%",   "%7B", "%7D",  "%3A",  "%25",
        "%7b", "a",   "A", "7",   "F",   "\0"s,  "\xff", "}:",
        ":{",  "res", "",  "job", "x",   "fence"};
    std::string out;
    const size_t pieces = Uniform(max_len + 1);
    for (size_t i = 0; i < pieces; ++i) out += kPieces[Uniform(kPieces.size())];
    return out;
  }

  std::vector<std::string> Parts() {
    std::vector<std::string> parts(Uniform(5));
    for (std::string& part : parts) part = Text(3);
    return parts;
  }

  std::string Prefix() {
    static const std::vector<std::string> kPrefixes = {
        "lockfleet", "p", "a:b", "x%y", "res", "a:res:", ":", "%7B"};
    return kPrefixes[Uniform(kPrefixes.size())];
  }

  size_t Uniform(size_t n) {
    return std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }

 private:
  std::mt19937_64 rng_;
};

std::string Describe(const ResourceKey& k) {
  std::string out = "prefix '" + k.prefix + "' name '" + k.name + "' parts [";
  for (const std::string& part : k.parts) out += "'" + part + "' ";
  return out + "]";
}

TEST(ResourceKey, DistinctNamesAndPartsGiveDistinctKeysThatDecodeBack) {
  constexpr uint64_t kSeed = 20240613;
  constexpr int kIterations = 300000;
  Generator gen(kSeed);
  std::unordered_map<std::string, ResourceKey> seen;
  seen.reserve(kIterations);
  int collisions_checked = 0;
  for (int i = 0; i < kIterations; ++i) {
    ResourceKey want{gen.Prefix(), gen.Text(4), gen.Parts()};
    if (want.name.empty()) want.name = "n";
    const std::string key =
        FencedResource::KeyOf(want.prefix, want.name, want.parts);
    // What a failure names (seed, iteration, input, key); built only then
    // (<< after an assertion runs only when it fails): a SCOPED_TRACE per
    // iteration cost more than the checks, 29 s of the test under TSan.
    const auto at = [&] {
      return "seed " + std::to_string(kSeed) + " iteration " +
             std::to_string(i) + ": " + Describe(want) + " key " + key;
    };

    // The key decodes back to exactly what made it.
    const std::optional<ResourceKey> got = FencedResource::ParseKey(key);
    ASSERT_TRUE(got.has_value()) << at();
    ASSERT_EQ(*got, want) << at();

    // Injective: a key seen before came from the same prefix, name, parts.
    auto [it, inserted] = seen.emplace(key, want);
    if (!inserted) {
      ++collisions_checked;
      ASSERT_EQ(it->second, want) << "two inputs made the key: " << at();
    }

    // One '{', one '}', and the tag is the encoded name: every key of the
    // resource (its fence key too) lands in one slot.
    ASSERT_EQ(std::count(key.begin(), key.end(), '{'), 1) << at();
    ASSERT_EQ(std::count(key.begin(), key.end(), '}'), 1) << at();
    const std::string fence = FencedResource::KeyOf(
        want.prefix, want.name, {std::string_view("fence")});
    ASSERT_EQ(HashTag(key), HashTag(fence)) << at();
    ASSERT_EQ(key.rfind(want.prefix + ":res:{", 0), 0u) << at();
    if (want.name.find_first_of("{}%") == std::string::npos) {
      ASSERT_EQ(HashTag(key), want.name) << at();  // the lock's slot as well
    }

    // The path form is the parts form when no part holds ':'.
    bool colon = want.parts.empty();
    std::string path;
    for (size_t p = 0; p < want.parts.size(); ++p) {
      colon = colon || want.parts[p].find(':') != std::string::npos;
      path += (p ? ":" : "") + want.parts[p];
    }
    if (!colon) {
      ASSERT_EQ(FencedResource::KeyOf(want.prefix, want.name, path), key)
          << at();
    }
  }
  // The generator's alphabet is small: it must have produced repeats, so the
  // injectivity check above compared real collisions of the map, not none.
  EXPECT_GT(collisions_checked, 1000);
  EXPECT_GT(seen.size(), 100000u);
}

// Whatever ParseKey accepts is a key KeyOf makes from what it returned, so
// two different strings never decode to the same parts.
TEST(ResourceKey, ParseKeyAcceptsOnlyCanonicalKeys) {
  constexpr uint64_t kSeed = 77;
  Generator gen(kSeed);
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string key =
        FencedResource::KeyOf(gen.Prefix(), "n" + gen.Text(3), gen.Parts());
    // Mutate it: replace, insert or delete a byte or a piece.
    const size_t at = gen.Uniform(key.size() + 1);
    const std::string piece = gen.Text(1);
    switch (gen.Uniform(3)) {
      case 0:
        key.insert(at, piece);
        break;
      case 1:
        if (at < key.size()) key.erase(at, 1);
        break;
      default:
        if (at < key.size()) key.replace(at, 1, piece);
    }
    const std::optional<ResourceKey> parsed = FencedResource::ParseKey(key);
    if (!parsed) continue;
    ++accepted;
    ASSERT_EQ(
        FencedResource::KeyOf(parsed->prefix, parsed->name, parsed->parts), key)
        << "seed " << kSeed << " iteration " << i;
  }
  EXPECT_GT(accepted, 10000);
}

TEST(ResourceKey, OrdinaryNamesAndPartsKeepTheirKeys) {
  EXPECT_EQ(FencedResource::KeyOf("lockfleet", "product:7", "stock"),
            "lockfleet:res:{product:7}:stock");
  EXPECT_EQ(FencedResource::KeyOf("lockfleet", "l", {"job", "order-1"}),
            "lockfleet:res:{l}:job:order-1");
  EXPECT_EQ(FencedResource::KeyOf("p", "report", "schedule:report:history"),
            "p:res:{report}:schedule:report:history");
  EXPECT_EQ(FencedResource::KeyOf("p", "r", {"schedule", "report", "history"}),
            "p:res:{r}:schedule:report:history");
}

// The injections of issue 13 item 5, spelled out.
TEST(ResourceKey, BracesColonsAndPercentsCannotShiftTheBoundaries) {
  // Lock "A}:x" + "stock" used to be lock "A" + "x}:stock".
  EXPECT_NE(FencedResource::KeyOf("p", "A}:x", {"stock"}),
            FencedResource::KeyOf("p", "A", {"x}:stock"}));
  EXPECT_NE(FencedResource::KeyOf("p", "A}:x", "stock"),
            FencedResource::KeyOf("p", "A", "x}:stock"));
  // A job id "1}:stock" under lock "A" used to be the stock of "A}:job:1".
  EXPECT_NE(FencedResource::KeyOf("p", "A", {"job", "1}:stock"}),
            FencedResource::KeyOf("p", "A}:job:1", {"stock"}));
  // Two jobs on different locks used to share a done marker.
  EXPECT_NE(FencedResource::KeyOf("p", "A", {"job", "x}:job:y"}),
            FencedResource::KeyOf("p", "A}:job:x", {"job", "y"}));
  // A ':' in an id is not a part boundary; '%' cannot fake an escape.
  EXPECT_NE(FencedResource::KeyOf("p", "A", {"job", "a:b"}),
            FencedResource::KeyOf("p", "A", {"job", "a", "b"}));
  EXPECT_NE(FencedResource::KeyOf("p", "A", {"x%3Ay"}),
            FencedResource::KeyOf("p", "A", {"x:y"}));
  EXPECT_EQ(FencedResource::KeyOf("p", "A}", {"x:y", "%"}),
            "p:res:{A%7D}:x%3Ay:%25");
  // Empty parts count: no parts, one empty part and two differ.
  EXPECT_EQ(FencedResource::KeyOf("p", "A", std::span<const std::string>{}),
            "p:res:{A}");
  EXPECT_EQ(FencedResource::KeyOf("p", "A", {""}), "p:res:{A}:");
  EXPECT_EQ(FencedResource::KeyOf("p", "A", {"", ""}), "p:res:{A}::");
  // Binary bytes are kept as they are.
  EXPECT_EQ(FencedResource::KeyOf("p", "\0\xff"s, {"\0"s}),
            "p:res:{\0\xff}:\0"s);
}

TEST(ResourceKey, BadPrefixNameAndTheReservedFenceKeyAreRefused) {
  auto redis = std::make_shared<RedisClient>(
      RedisOptions{.url = "redis://127.0.0.1:1"});  // never connected
  EXPECT_THROW(FencedResource(redis, ""), Error);
  EXPECT_THROW(FencedResource(redis, "r", "a{b"), Error);
  EXPECT_THROW(FencedResource::KeyOf("p", "", "x"), Error);
  EXPECT_THROW(FencedResource::KeyOf("", "n", "x"), Error);
  EXPECT_THROW(FencedResource::KeyOf("a}", "n", "x"), Error);
  FencedResource res(redis, "A}:x", "p");
  EXPECT_EQ(res.Key({"job", "1}:x"}),
            FencedResource::KeyOf("p", "A}:x", {"job", "1}:x"}));
  EXPECT_EQ(res.Key("a:b"), FencedResource::KeyOf("p", "A}:x", {"a", "b"}));
  EXPECT_EQ(res.FenceKey(), "p:res:{A%7D:x}:fence");
  try {
    res.Key({"fence"});
    FAIL() << "the fence key is not a data key";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_THROW(res.Key("fence"), Error);
  EXPECT_NO_THROW(res.Key({"fence", "x"}));
  EXPECT_NO_THROW(res.Key({"fence%"}));
  for (std::string_view bad :
       {"p:res:{A}x", "p:res:{}:x", "p:{A}:x", "p:res:{A%7d}", "p:res:{A%41}",
        "p:res:{A}:a:b}", "p:res:{A}:%3", "p:res:{A:{B}", ":res:{A}",
        "p}:res:{A}", "p:res:{A}:x%3a"}) {
    EXPECT_FALSE(FencedResource::ParseKey(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace lockfleet::testing
