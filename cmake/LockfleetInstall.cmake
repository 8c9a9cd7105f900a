# Install and export rules. Included at the end of the top-level
# CMakeLists.txt, after every module has defined its targets.
#
# `cmake --install <build> --prefix <dir>` installs
#   lib/liblockfleet_<module>.a        every library target that exists
#   include/lockfleet/<module>/...     each module's public headers
#   bin/lockfleet                      the CLI (target lockfleet_cli)
#   lib/cmake/lockfleet/               lockfleetConfig.cmake, its version file
#                                      and lockfleetTargets.cmake
#   lib/pkgconfig/lockfleet*.pc        pkg-config files (LockfleetPkgConfig.cmake)
# so that a consumer writes
#   find_package(lockfleet 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE lockfleet::lockcore)
#
# Static libraries carry their PRIVATE dependencies into the export as
# $<LINK_ONLY:...>, so lockfleetConfig.cmake must find those again. The
# dependency code is derived from the targets' link libraries below; a link
# item this file does not know how to re-find stops the configure with a
# message saying where to teach it.

include(CMakePackageConfigHelpers)

set(LOCKFLEET_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/lockfleet"
    CACHE STRING "Where lockfleetConfig.cmake is installed (relative to the prefix)")

# Library modules in dependency order; a module whose target does not exist
# (yet) is skipped.
set(_lockfleet_libraries)
foreach(_module IN ITEMS config lockcore notifier worker metrics)
  if(TARGET lockfleet_${_module})
    list(APPEND _lockfleet_libraries lockfleet_${_module})
  endif()
endforeach()

foreach(_target IN LISTS _lockfleet_libraries)
  # The public headers use C++20 (std::stop_token, designated initializers):
  # consumers get that standard through the targets.
  target_compile_features(${_target} PUBLIC cxx_std_20)
  get_target_property(_source_dir ${_target} SOURCE_DIR)
  if(EXISTS "${_source_dir}/include/lockfleet")
    install(DIRECTORY "${_source_dir}/include/lockfleet"
            DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
            COMPONENT lockfleet_development
            FILES_MATCHING PATTERN "*.h")
  endif()
endforeach()

if(_lockfleet_libraries)
  install(TARGETS ${_lockfleet_libraries}
          EXPORT lockfleetTargets
          ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT lockfleet_development
          LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT lockfleet_runtime
          RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT lockfleet_runtime
          INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
endif()

if(TARGET lockfleet_cli)
  install(TARGETS lockfleet_cli
          RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT lockfleet_runtime)
endif()

# ---- dependencies lockfleetConfig.cmake must re-create ---------------------
# Each link item of an exported target becomes code in
# LOCKFLEET_CONFIG_DEPENDENCIES (see lockfleetConfig.cmake.in):
#   lockfleet::*         ours, defined by lockfleetTargets.cmake
#   Threads::Threads     find_dependency(Threads)
#   PkgConfig::<prefix>  pkg_check_modules(<prefix> IMPORTED_TARGET <modules>),
#                        the modules as the build's own pkg_check_modules call
#                        named them
#   <Package>::<target>  find_dependency(<Package>) (yaml-cpp::yaml-cpp,
#                        spdlog::spdlog, ...); packages that only ship a
#                        CMake config file, listed in
#                        _lockfleet_config_only_packages below
#                        (prometheus-cpp::core, civetweb::civetweb), get
#                        find_dependency(<Package> CONFIG)
#   yaml-cpp             find_dependency(yaml-cpp) (0.7 exports no namespace)
#   -lfoo, foo, /x/y.a   plain linker input: nothing to find
set(_lockfleet_link_items)
# INTERFACE_LINK_LIBRARIES is what the export writes: PUBLIC items, plus a
# static library's PRIVATE ones wrapped in $<LINK_ONLY:...>.
foreach(_target IN LISTS _lockfleet_libraries)
  get_target_property(_items ${_target} INTERFACE_LINK_LIBRARIES)
  if(NOT _items)
    continue()
  endif()
  foreach(_item IN LISTS _items)
    # Unwrap the generator expressions CMake itself uses for link items.
    string(REGEX REPLACE "^\\$<(LINK_ONLY|BUILD_INTERFACE|INSTALL_INTERFACE):(.*)>$"
           "\\1;\\2" _unwrapped "${_item}")
    if(NOT _unwrapped STREQUAL _item)
      list(GET _unwrapped 0 _kind)
      list(GET _unwrapped 1 _item)
      if(_kind STREQUAL "BUILD_INTERFACE")
        continue()  # never reaches an installed consumer
      endif()
    endif()
    list(APPEND _lockfleet_link_items "${_item}")
  endforeach()
endforeach()
list(REMOVE_DUPLICATES _lockfleet_link_items)

set(LOCKFLEET_CONFIG_DEPENDENCIES "")
set(_lockfleet_found_packages)
# Packages found through their own <Package>Config.cmake only: CMake ships
# no Find module for them, so the consumer skips the module search. (The
# metrics module links prometheus-cpp and civetweb PRIVATE; prometheus-cpp's
# config file itself finds civetweb, ZLIB and CURL again.)
set(_lockfleet_config_only_packages prometheus-cpp civetweb)
set(_lockfleet_uses_pkgconfig FALSE)
foreach(_item IN LISTS _lockfleet_link_items)
  if(_item MATCHES "^lockfleet(::|_)")
    continue()
  elseif(_item MATCHES "^PkgConfig::(.+)$")
    set(_prefix "${CMAKE_MATCH_1}")
    # FindPkgConfig keeps each call's arguments; keep only the module specs.
    set(_modules "${__pkg_config_arguments_${_prefix}}")
    list(REMOVE_ITEM _modules REQUIRED QUIET IMPORTED_TARGET GLOBAL NO_CMAKE_PATH
         NO_CMAKE_ENVIRONMENT_PATH)
    if(NOT _modules)
      set(_modules "${_prefix}")
    endif()
    list(JOIN _modules " " _modules)
    set(_lockfleet_uses_pkgconfig TRUE)
    string(APPEND LOCKFLEET_CONFIG_DEPENDENCIES
      "if(NOT TARGET PkgConfig::${_prefix})\n"
      "  pkg_check_modules(${_prefix} QUIET IMPORTED_TARGET ${_modules})\n"
      "  if(NOT TARGET PkgConfig::${_prefix})\n"
      "    set(lockfleet_FOUND FALSE)\n"
      "    set(lockfleet_NOT_FOUND_MESSAGE\n"
      "        \"lockfleet needs pkg-config module(s) '${_modules}' (Debian: the -dev package)\")\n"
      "    return()\n"
      "  endif()\n"
      "endif()\n")
  elseif(_item MATCHES "^([A-Za-z0-9_.+-]+)::[A-Za-z0-9_.+-]+$")
    list(APPEND _lockfleet_found_packages "${CMAKE_MATCH_1}")
  elseif(_item STREQUAL "yaml-cpp")
    list(APPEND _lockfleet_found_packages yaml-cpp)
  elseif(TARGET "${_item}")
    get_target_property(_imported "${_item}" IMPORTED)
    if(_imported)
      message(FATAL_ERROR
        "LockfleetInstall.cmake: an exported lockfleet target links the imported "
        "target '${_item}', and lockfleetConfig.cmake does not know which package "
        "defines it. Teach cmake/LockfleetInstall.cmake (see the table above).")
    endif()
    # A non-imported target of this build: install(EXPORT) itself checks
    # that it is exported.
  endif()
  # Anything else is a plain linker input (-lm, a path): nothing to find.
endforeach()

set(_lockfleet_package_code "")
if(_lockfleet_uses_pkgconfig)
  list(APPEND _lockfleet_found_packages PkgConfig)
endif()
list(REMOVE_DUPLICATES _lockfleet_found_packages)
foreach(_package IN LISTS _lockfleet_found_packages)
  if(_package IN_LIST _lockfleet_config_only_packages)
    string(APPEND _lockfleet_package_code "find_dependency(${_package} CONFIG)\n")
  else()
    string(APPEND _lockfleet_package_code "find_dependency(${_package})\n")
  endif()
endforeach()
string(PREPEND LOCKFLEET_CONFIG_DEPENDENCIES "${_lockfleet_package_code}")

# ---- package files -----------------------------------------------------------
configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/lockfleetConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/lockfleetConfig.cmake"
  INSTALL_DESTINATION "${LOCKFLEET_INSTALL_CMAKEDIR}")
# 0.x: a minor release may break the API, so only the same minor matches.
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/lockfleetConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMinorVersion)

if(_lockfleet_libraries)
  install(EXPORT lockfleetTargets
          NAMESPACE lockfleet::
          DESTINATION "${LOCKFLEET_INSTALL_CMAKEDIR}"
          COMPONENT lockfleet_development)
endif()
install(FILES
          "${PROJECT_BINARY_DIR}/lockfleetConfig.cmake"
          "${PROJECT_BINARY_DIR}/lockfleetConfigVersion.cmake"
        DESTINATION "${LOCKFLEET_INSTALL_CMAKEDIR}"
        COMPONENT lockfleet_development)

include("${CMAKE_CURRENT_LIST_DIR}/LockfleetPkgConfig.cmake")

unset(_lockfleet_libraries)
unset(_lockfleet_link_items)
unset(_lockfleet_found_packages)
unset(_lockfleet_config_only_packages)
unset(_lockfleet_package_code)
unset(_lockfleet_uses_pkgconfig)
