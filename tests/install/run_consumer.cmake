# Run by CTest (see CMakeLists.txt) as `cmake -D... -P run_consumer.cmake`:
#   1. cmake --install BUILD_DIR into WORK_DIR/prefix
#   2. check the installed layout (config files, headers, no C library
#      headers leaking into include/, the lockfleet binary)
#   3. configure + build consumer/ against that prefix only, and run its
#      programs (consumer_notifier only when lockfleet::notifier exists)
#   4. build and run the same programs with `pkg-config --cflags --libs`
#      (the prefix's lockfleet-*.pc), without CMake
foreach(_var IN ITEMS BUILD_DIR WORK_DIR CONSUMER_SOURCE_DIR GENERATOR CXX_COMPILER
                      EXPECT_VERSION)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: -D${_var}=... is required")
  endif()
endforeach()

set(_prefix "${WORK_DIR}/prefix")
set(_consumer_build "${WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# run(NAME COMMAND...): runs a command, output to the test log; fails the
# test on a non-zero exit.
function(run name)
  message(STATUS "[install test] ${name}: ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "[install test] ${name} failed (${_rc})")
  endif()
endfunction()

# ---- 1. install ----
set(_config_args)
if(CONFIG)
  set(_config_args --config "${CONFIG}")
endif()
run(install "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${_prefix}" ${_config_args})

# ---- 2. layout ----
file(GLOB_RECURSE _config_files "${_prefix}/*/lockfleetConfig.cmake")
if(NOT _config_files)
  message(FATAL_ERROR "[install test] no lockfleetConfig.cmake under ${_prefix}")
endif()
list(GET _config_files 0 _config_file)
get_filename_component(_config_dir "${_config_file}" DIRECTORY)
foreach(_file IN ITEMS lockfleetConfigVersion.cmake lockfleetTargets.cmake)
  if(NOT EXISTS "${_config_dir}/${_file}")
    message(FATAL_ERROR "[install test] ${_config_dir}/${_file} not installed")
  endif()
endforeach()
foreach(_header IN ITEMS lockfleet/lockcore/lock_client.h lockfleet/lockcore/lease.h
                         lockfleet/lockcore/redis_url.h)
  if(NOT EXISTS "${_prefix}/include/${_header}")
    message(FATAL_ERROR "[install test] header include/${_header} not installed")
  endif()
endforeach()
# No C header of hiredis or librdkafka may appear in a public header.
file(GLOB_RECURSE _headers "${_prefix}/include/*")
foreach(_header IN LISTS _headers)
  file(STRINGS "${_header}" _bad REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"](hiredis|librdkafka)/")
  if(_bad)
    message(FATAL_ERROR "[install test] ${_header} includes a C library header: ${_bad}")
  endif()
endforeach()
if(EXPECT_NOTIFIER AND NOT EXISTS "${_prefix}/include/lockfleet/notifier")
  message(FATAL_ERROR "[install test] the notifier headers were not installed")
endif()
if(EXPECT_CLI)
  if(NOT EXISTS "${_prefix}/bin/lockfleet")
    message(FATAL_ERROR "[install test] bin/lockfleet not installed")
  endif()
  # --version: "lockfleet VERSION" and, from a git checkout, "(git ...)".
  execute_process(COMMAND "${_prefix}/bin/lockfleet" --version
                  OUTPUT_VARIABLE _version RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0 OR NOT _version MATCHES "^lockfleet ${EXPECT_VERSION}")
    message(FATAL_ERROR
      "[install test] lockfleet --version printed '${_version}' (${_rc})")
  endif()
  # The bash completion, where bash-completion finds it, and valid bash.
  set(_completion "${_prefix}/share/bash-completion/completions/lockfleet")
  if(NOT EXISTS "${_completion}")
    message(FATAL_ERROR "[install test] ${_completion} not installed")
  endif()
  run(completion-syntax bash -n "${_completion}")
  file(STRINGS "${_completion}" _complete REGEX "^complete -F _lockfleet lockfleet$")
  if(NOT _complete)
    message(FATAL_ERROR "[install test] ${_completion} registers no completion")
  endif()
endif()

# ---- 3. consumer ----
set(_consumer_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${_consumer_build}" -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_PREFIX_PATH=${_prefix}"
  # Find lockfleet in the prefix only: not through the user package
  # registry, nor a copy installed on the system.
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  "-Dlockfleet_ROOT=${_prefix}"
  # ... and check the version file: this exact version must be accepted.
  "-DLOCKFLEET_EXPECT_VERSION=${EXPECT_VERSION}")
if(CONFIG)
  list(APPEND _consumer_args "-DCMAKE_BUILD_TYPE=${CONFIG}")
endif()
if(CONSUMER_FLAGS)
  list(APPEND _consumer_args "-DCMAKE_CXX_FLAGS=${CONSUMER_FLAGS}"
                             "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_FLAGS}")
endif()
run(configure "${CMAKE_COMMAND}" ${_consumer_args})

file(STRINGS "${_consumer_build}/CMakeCache.txt" _found REGEX "^lockfleet_DIR:")
string(FIND "${_found}" "${_prefix}" _at)
if(_at EQUAL -1)
  message(FATAL_ERROR "[install test] consumer found lockfleet elsewhere: ${_found}")
endif()

run(build "${CMAKE_COMMAND}" --build "${_consumer_build}" ${_config_args})

# run_program(NAME REQUIRED): runs a consumer program if it was built (it
# must be when REQUIRED) and checks that it says "ok".
function(run_program name required)
  set(_exe "${_consumer_build}/${name}")
  if(NOT EXISTS "${_exe}" AND CONFIG)
    set(_exe "${_consumer_build}/${CONFIG}/${name}")  # multi-config generators
  endif()
  if(NOT EXISTS "${_exe}")
    if(required)
      message(FATAL_ERROR "[install test] ${name} was not built")
    endif()
    return()
  endif()
  message(STATUS "[install test] run: ${_exe}")
  execute_process(COMMAND "${_exe}" RESULT_VARIABLE _rc OUTPUT_VARIABLE _out
                  ERROR_VARIABLE _err)
  message(STATUS "[install test] ${name} said: ${_out}${_err}")
  if(NOT _rc EQUAL 0 OR NOT _out MATCHES ": ok")
    message(FATAL_ERROR "[install test] ${name} failed (${_rc})")
  endif()
endfunction()

run_program(consumer TRUE)
run_program(consumer_notifier "${EXPECT_NOTIFIER}")

# ---- 4. the same programs built with pkg-config, without CMake ----
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "[install test] -DPKG_CONFIG=... is required")
endif()
file(GLOB_RECURSE _pc_files "${_prefix}/*/lockfleet.pc")
if(NOT _pc_files)
  message(FATAL_ERROR "[install test] no lockfleet.pc under ${_prefix}")
endif()
list(GET _pc_files 0 _pc_file)
get_filename_component(_pc_dir "${_pc_file}" DIRECTORY)
# Only the prefix's files, and the system's for the dependencies.
set(_pkg_config "${CMAKE_COMMAND}" -E env "PKG_CONFIG_PATH=${_pc_dir}" "${PKG_CONFIG}")
file(GLOB _all_pc "${_pc_dir}/lockfleet*.pc")
foreach(_pc IN LISTS _all_pc)
  get_filename_component(_module "${_pc}" NAME_WE)
  run(pkg-config-validate ${_pkg_config} --validate "${_module}")
endforeach()
execute_process(COMMAND ${_pkg_config} --modversion lockfleet
                OUTPUT_VARIABLE _pc_version OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0 OR NOT _pc_version STREQUAL EXPECT_VERSION)
  message(FATAL_ERROR
    "[install test] pkg-config --modversion lockfleet: '${_pc_version}' (${_rc})")
endif()
# pc_program(NAME SOURCE MODULE): compile and link SOURCE with the flags
# `pkg-config --cflags --libs MODULE` gives, then run it like the others.
function(pc_program name source module)
  execute_process(COMMAND ${_pkg_config} --cflags --libs "${module}"
                  OUTPUT_VARIABLE _flags OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "[install test] pkg-config --cflags --libs ${module} failed")
  endif()
  separate_arguments(_flags UNIX_COMMAND "${_flags}")
  separate_arguments(_extra UNIX_COMMAND "${CONSUMER_FLAGS}")
  file(MAKE_DIRECTORY "${WORK_DIR}/pkg-config")
  set(_exe "${WORK_DIR}/pkg-config/${name}")
  # The .pc files leave the language standard to the consumer.
  run(pkg-config-build "${CXX_COMPILER}" -std=c++20 ${_extra} -o "${_exe}"
      "${CONSUMER_SOURCE_DIR}/${source}" ${_flags})
  execute_process(COMMAND "${_exe}" RESULT_VARIABLE _rc OUTPUT_VARIABLE _out
                  ERROR_VARIABLE _err)
  message(STATUS "[install test] ${name} (pkg-config) said: ${_out}${_err}")
  if(NOT _rc EQUAL 0 OR NOT _out MATCHES ": ok")
    message(FATAL_ERROR "[install test] ${name} (pkg-config) failed (${_rc})")
  endif()
endfunction()
pc_program(consumer main.cc lockfleet-lockcore)
if(EXPECT_NOTIFIER)
  pc_program(consumer_notifier notifier_main.cc lockfleet-notifier)
endif()
message(STATUS "[install test] ok: lockfleet ${EXPECT_VERSION} installs and is usable")
