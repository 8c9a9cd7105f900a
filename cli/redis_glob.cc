#include "redis_glob.h"

#include <utility>

namespace lockfleet::cli {

std::string CheckGlob(std::string_view glob) {
  if (glob.empty()) return "it is empty";
  for (size_t i = 0; i < glob.size(); ++i) {
    if (glob[i] == '\\') {
      if (++i == glob.size()) return "it ends with a lone '\\'";
    } else if (glob[i] == '[') {
      size_t j = i + 1;
      if (j < glob.size() && glob[j] == '^') ++j;
      for (; j < glob.size() && glob[j] != ']'; ++j) {
        if (glob[j] == '\\' && ++j == glob.size()) break;
      }
      if (j >= glob.size()) return "a '[' is never closed by ']'";
      i = j;
    }
  }
  return "";
}

namespace {

// Whether the single-character token at glob[*p] (not '*') matches `c`;
// advances *p past it.
bool MatchToken(std::string_view glob, size_t* p, char c) {
  const char head = glob[*p];
  if (head == '?') {
    ++*p;
    return true;
  }
  if (head == '\\') {
    const bool match = glob[*p + 1] == c;
    *p += 2;
    return match;
  }
  if (head != '[') {
    ++*p;
    return head == c;
  }
  size_t i = *p + 1;
  const bool negate = glob[i] == '^';
  if (negate) ++i;
  bool match = false;
  const auto u = static_cast<unsigned char>(c);
  while (glob[i] != ']') {
    if (glob[i] == '\\') {
      ++i;
      match |= glob[i] == c;
      ++i;
    } else if (i + 2 < glob.size() && glob[i + 1] == '-' &&
               glob[i + 2] != ']') {
      auto low = static_cast<unsigned char>(glob[i]);
      auto high = static_cast<unsigned char>(glob[i + 2]);
      if (low > high) std::swap(low, high);
      match |= u >= low && u <= high;
      i += 3;
    } else {
      match |= glob[i] == c;
      ++i;
    }
  }
  *p = i + 1;
  return match != negate;
}

}  // namespace

bool GlobMatch(std::string_view glob, std::string_view text) {
  // Two pointers with one backtrack point (the last '*'): every other token
  // matches exactly one byte, so this is exact and linear per star.
  size_t p = 0, t = 0;
  size_t star = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < glob.size() && glob[p] == '*') {
      star = ++p;
      star_t = t;
      continue;
    }
    size_t next = p;
    if (p < glob.size() && MatchToken(glob, &next, text[t])) {
      p = next;
      ++t;
      continue;
    }
    if (star == std::string_view::npos) return false;
    p = star;
    t = ++star_t;
  }
  while (p < glob.size() && glob[p] == '*') ++p;
  return p == glob.size();
}

std::string EscapeGlob(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace lockfleet::cli
