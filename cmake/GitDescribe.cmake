# Writes OUT: `#define LOCKFLEET_GIT_DESCRIBE "..."` with `git describe
# --always --dirty` of SOURCE_DIR ("" when it is no git checkout, e.g. a
# source tarball), rewriting the file only when that changed. Run at every
# build (cli/CMakeLists.txt), so `lockfleet --version` names the build's
# commit, not the one of the last configure.
execute_process(
  COMMAND git describe --tags --always --dirty
  WORKING_DIRECTORY "${SOURCE_DIR}"
  OUTPUT_VARIABLE describe
  OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  set(describe "")
endif()
set(text "#define LOCKFLEET_GIT_DESCRIBE \"${describe}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL text)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${text}")
