// Text helpers shared by the config sources. Private to the config module.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lockfleet::config::internal {

// `text` in single quotes for an error message: at most 40 bytes shown (then
// "..."), control and non-ASCII bytes escaped as \xNN so a stray byte cannot
// garble the terminal.
std::string Quote(std::string_view text);

// The candidate closest to `word`, for "did you mean ...?", or "" when none is
// close. Case and '-' versus '_' do not count; otherwise a candidate is close
// when few edits (insert, delete, substitute, swap neighbours) turn `word`
// into it, or when `word` (3+ characters) is a prefix of it.
std::string ClosestMatch(std::string_view word,
                         const std::vector<std::string>& candidates);

// "a, b, c" (for "expected one of ...").
std::string JoinNames(const std::vector<std::string>& names);

}  // namespace lockfleet::config::internal
