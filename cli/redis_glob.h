// Redis's glob syntax (SCAN MATCH, KEYS): checked before it is sent, matched
// locally where Redis cannot (a dead letter's reason), escaped for literal
// prefixes.
#pragma once

#include <string>
#include <string_view>

namespace lockfleet::cli {

// "" if `glob` is a well-formed Redis-style glob (*, ?, [abc], [^a-z], \x),
// else what is wrong with it.
std::string CheckGlob(std::string_view glob);
// Whether `text` matches `glob` (as Redis's MATCH does; binary-safe).
// REQUIRES: CheckGlob(glob) is "".
bool GlobMatch(std::string_view glob, std::string_view text);
// `text` with *, ?, [, ] and \ escaped, so it matches only itself.
std::string EscapeGlob(std::string_view text);

}  // namespace lockfleet::cli
