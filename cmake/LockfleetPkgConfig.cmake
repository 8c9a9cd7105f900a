# pkg-config files, installed beside the CMake package for builds that do
# not use CMake:
#   lib/pkgconfig/lockfleet-<module>.pc   one per library module
#   lib/pkgconfig/lockfleet.pc            all of them
# so that
#   c++ app.cc $(pkg-config --cflags --libs lockfleet-lockcore)
# compiles and links. Included by LockfleetInstall.cmake with
# _lockfleet_libraries set. Each module's Requires and Libs are derived from
# its target's link items, as lockfleetConfig.cmake's dependencies are; an
# item this file cannot map stops the configure. The files are relocatable
# (prefix from ${pcfiledir}). Static libraries (the default) list their
# dependencies in Requires/Libs, so plain `pkg-config --libs` links; shared
# ones in Requires.private/Libs.private.

set(LOCKFLEET_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
    CACHE STRING "Where the lockfleet .pc files are installed (relative to the prefix)")

# The prefix relative to the .pc file's directory, and libdir and includedir
# relative to the prefix — or absolute where the packager made them so.
if(IS_ABSOLUTE "${LOCKFLEET_INSTALL_PKGCONFIGDIR}")
  set(_lockfleet_pc_prefix "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _lockfleet_pc_up "/root/${LOCKFLEET_INSTALL_PKGCONFIGDIR}" "/root")
  string(REGEX REPLACE "/$" "" _lockfleet_pc_up "${_lockfleet_pc_up}")
  set(_lockfleet_pc_prefix "\${pcfiledir}/${_lockfleet_pc_up}")
endif()
foreach(_dir IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_dir}}")
    set(_lockfleet_pc_${_dir} "${CMAKE_INSTALL_${_dir}}")
  else()
    set(_lockfleet_pc_${_dir} "\${prefix}/${CMAKE_INSTALL_${_dir}}")
  endif()
endforeach()

# _lockfleet_pc_items(TARGET OUT_REQUIRES OUT_LIBS): the pkg-config modules
# and plain linker flags for TARGET's link items.
function(_lockfleet_pc_items target out_requires out_libs)
  set(_requires)
  set(_libs)
  get_target_property(_items ${target} LINK_LIBRARIES)
  if(NOT _items)
    set(_items)
  endif()
  foreach(_item IN LISTS _items)
    if(_item MATCHES "^lockfleet::(.+)$")
      list(APPEND _requires "lockfleet-${CMAKE_MATCH_1}")
    elseif(_item MATCHES "^PkgConfig::(.+)$")
      set(_modules "${__pkg_config_arguments_${CMAKE_MATCH_1}}")
      list(REMOVE_ITEM _modules REQUIRED QUIET IMPORTED_TARGET GLOBAL NO_CMAKE_PATH
           NO_CMAKE_ENVIRONMENT_PATH)
      list(APPEND _requires ${_modules})
    elseif(_item STREQUAL "Threads::Threads")
      list(APPEND _libs "-pthread")
    elseif(_item STREQUAL "yaml-cpp")
      list(APPEND _requires yaml-cpp)
    elseif(_item STREQUAL "OpenSSL::Crypto")
      list(APPEND _requires libcrypto)
    elseif(_item STREQUAL "OpenSSL::SSL")
      list(APPEND _requires libssl)
    elseif(_item STREQUAL "prometheus-cpp::core")
      list(APPEND _requires prometheus-cpp-core)
    elseif(_item STREQUAL "nlohmann_json::nlohmann_json")
      # Header-only, used in .cc files only: nothing to link.
    else()
      message(FATAL_ERROR
        "LockfleetPkgConfig.cmake: lockfleet target '${target}' links '${_item}', "
        "which this file cannot map to a pkg-config module. Teach "
        "cmake/LockfleetPkgConfig.cmake.")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _requires)
  list(REMOVE_DUPLICATES _libs)
  set(${out_requires} "${_requires}" PARENT_SCOPE)
  set(${out_libs} "${_libs}" PARENT_SCOPE)
endfunction()

set(_lockfleet_pc_files)
set(_lockfleet_pc_all)
foreach(_target IN LISTS _lockfleet_libraries)
  string(REGEX REPLACE "^lockfleet_" "" _module "${_target}")
  _lockfleet_pc_items(${_target} _requires _libs)
  # lockfleet modules are always public (their headers include each
  # other's); a static library's other dependencies must be linked by the
  # consumer, a shared one's only by the library itself.
  set(_public)
  set(_other)
  foreach(_r IN LISTS _requires)
    if(_r MATCHES "^lockfleet-")
      list(APPEND _public "${_r}")
    else()
      list(APPEND _other "${_r}")
    endif()
  endforeach()
  get_target_property(_type ${_target} TYPE)
  if(_type STREQUAL "SHARED_LIBRARY")
    list(JOIN _public ", " _requires_line)
    list(JOIN _other ", " _requires_private)
    set(_libs_private "${_libs}")
    set(_libs_public)
  else()
    list(APPEND _public ${_other})
    list(JOIN _public ", " _requires_line)
    set(_requires_private)
    set(_libs_private)
    set(_libs_public "${_libs}")
  endif()
  list(JOIN _libs_public " " _libs_public)
  list(JOIN _libs_private " " _libs_private)
  set(_text "# lockfleet ${PROJECT_VERSION}: the ${_module} module (lockfleet::${_module} in CMake).
prefix=${_lockfleet_pc_prefix}
libdir=${_lockfleet_pc_LIBDIR}
includedir=${_lockfleet_pc_INCLUDEDIR}

Name: lockfleet-${_module}
Description: lockfleet ${_module}: distributed locks and job workers on Redis and Kafka
Version: ${PROJECT_VERSION}
Requires: ${_requires_line}
Requires.private: ${_requires_private}
# The public headers need C++20: compile with -std=c++20 or later.
Cflags: -I\${includedir}
Libs: -L\${libdir} -l$<TARGET_FILE_BASE_NAME:${_target}> ${_libs_public}
Libs.private: ${_libs_private}
")
  file(GENERATE OUTPUT "${PROJECT_BINARY_DIR}/pkgconfig/lockfleet-${_module}.pc"
       CONTENT "${_text}")
  list(APPEND _lockfleet_pc_files "${PROJECT_BINARY_DIR}/pkgconfig/lockfleet-${_module}.pc")
  list(APPEND _lockfleet_pc_all "lockfleet-${_module}")
endforeach()

# lockfleet.pc: every module.
list(JOIN _lockfleet_pc_all ", " _lockfleet_pc_all)
file(WRITE "${PROJECT_BINARY_DIR}/pkgconfig/lockfleet.pc"
"# lockfleet ${PROJECT_VERSION}: every library module.
Name: lockfleet
Description: lockfleet: distributed locks and job workers on Redis and Kafka
Version: ${PROJECT_VERSION}
Requires: ${_lockfleet_pc_all}
")
list(APPEND _lockfleet_pc_files "${PROJECT_BINARY_DIR}/pkgconfig/lockfleet.pc")
if(_lockfleet_pc_files)
  install(FILES ${_lockfleet_pc_files}
          DESTINATION "${LOCKFLEET_INSTALL_PKGCONFIGDIR}"
          COMPONENT lockfleet_development)
endif()
unset(_lockfleet_pc_files)
unset(_lockfleet_pc_all)
unset(_lockfleet_pc_up)
unset(_lockfleet_pc_prefix)
unset(_lockfleet_pc_LIBDIR)
unset(_lockfleet_pc_INCLUDEDIR)
