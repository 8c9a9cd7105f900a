// LoadFile / LoadString: from bytes to a YAML document to a Config. The
// schema itself is in schema.cc.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/config/config.h"
#include "reader.h"
#include "schema.h"

namespace lockfleet::config {
namespace {

using internal::Context;
using internal::Found;
using internal::Value;

constexpr char kSections[] = "redis, kafka, locks, worker, metrics, logging";

// Where each YAML document's first node is; nothing else.
class DocumentMarks : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;  // one per document

  void OnDocumentStart(const YAML::Mark& mark) override {
    marks.push_back(mark);
    first_node_ = true;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&,
                       YAML::anchor_t, YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnMapEnd() override {}

 private:
  void Node(const YAML::Mark& mark) {
    if (first_node_) marks.back() = mark;
    first_node_ = false;
  }
  bool first_node_ = false;
};

// The first-node marks of the documents in `text`. Throws YAML::Exception
// for invalid YAML. Not YAML::LoadAll: on some invalid input (",}") yaml-cpp
// 0.7's parser yields empty documents at one position forever, and LoadAll
// keeps every one of them — a hang that eats all memory. A document that
// does not start past the previous one is that loop: an error at its mark.
std::vector<YAML::Mark> CountDocuments(const std::string& text) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  DocumentMarks documents;
  while (parser.HandleNextDocument(documents)) {
    const size_t n = documents.marks.size();
    if (n >= 2 && documents.marks[n - 1].pos <= documents.marks[n - 2].pos) {
      throw YAML::ParserException(documents.marks[n - 1],
                                  "unexpected text (yaml-cpp cannot parse "
                                  "past it)");
    }
  }
  return documents.marks;
}

YAML::Mark MarkAt(std::string_view text, size_t offset) {
  YAML::Mark mark;
  mark.pos = static_cast<int>(offset);
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++mark.line;
      mark.column = 0;
    } else {
      ++mark.column;
    }
  }
  return mark;
}

// yaml-cpp says "illegal map value" or the like for a tab in the
// indentation; name the likely cause when the failing line has one.
std::string TabHint(std::string_view text, const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  int line = 0;
  size_t start = 0;
  while (line < mark.line && start < text.size()) {
    const size_t newline = text.find('\n', start);
    if (newline == std::string_view::npos) return "";
    start = newline + 1;
    ++line;
  }
  for (size_t i = start; i < text.size(); ++i) {
    if (text[i] == '\t') {
      return " (a tab in the indentation? YAML indents with spaces only)";
    }
    if (text[i] != ' ') break;
  }
  return "";
}

[[noreturn]] void Throw(Context& context) {
  throw ConfigErrors(context.TakeErrors());
}

}  // namespace

const char* LogLevelName(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "unknown";
}

const char* LogFormatName(LogFormat format) noexcept {
  switch (format) {
    case LogFormat::kText:
      return "text";
    case LogFormat::kJson:
      return "json";
  }
  return "unknown";
}

const char* LockModeName(LockMode mode) noexcept {
  return mode == LockMode::kWrite ? "write" : "read";
}

std::optional<LockMode> LockModeFromName(std::string_view name) noexcept {
  if (name == "read") return LockMode::kRead;
  if (name == "write") return LockMode::kWrite;
  return std::nullopt;
}

Config LoadString(std::string_view text, std::string_view name,
                  const LoadOptions& options) {
  Context context{std::string(name), options.env};
  // yaml-cpp reports a NUL byte as a bad escape somewhere; say what it is.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    context.Error(MarkAt(text, nul), "",
                  "expected a YAML text file, found a NUL byte (a binary "
                  "file?)");
    Throw(context);
  }
  std::vector<YAML::Mark> documents;
  YAML::Node root;
  try {
    const std::string owned(text);
    documents = CountDocuments(owned);
    if (!documents.empty()) root = YAML::Load(owned);  // the first one
  } catch (const YAML::Exception& e) {
    context.Error(e.mark, "", "invalid YAML: " + e.msg + TabHint(text, e.mark));
    Throw(context);
  }
  if (documents.empty() || (documents.size() == 1 && root.IsNull())) {
    context.Error(MarkAt(text, 0), "",
                  "expected a mapping with at least redis.url, found an empty "
                  "file (see 'lockfleet config example')");
    Throw(context);
  }
  if (documents.size() > 1) {
    context.Error(documents[1], "",
                  "expected one YAML document, found " +
                      std::to_string(documents.size()) +
                      " (separated by '---')");
    Throw(context);
  }
  if (!root.IsMap()) {
    context.Error(root.Mark(), "",
                  std::string("expected a mapping of sections (") + kSections +
                      ") at the top level, found " + Found(root));
    Throw(context);
  }
  Config config =
      internal::ReadConfig(context, Value{root, "", root.Mark(), root.Mark()});
  if (context.has_errors()) Throw(context);
  return config;
}

Config LoadFile(const std::string& path, const LoadOptions& options) {
  auto fail = [&](const std::string& message) {
    throw ConfigErrors({Diagnostic{.file = path, .message = message}});
  };
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    fail("cannot read: it is a directory, expected a YAML file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(std::string("cannot read: ") + std::strerror(errno));
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) fail(std::string("cannot read: ") + std::strerror(errno));
  return LoadString(content.str(), path, options);
}

}  // namespace lockfleet::config
