# Scenarios 5-6 of the fault-injection suite (docs/RELIABILITY.md):
#   worker_chaos  5  a `lockfleet worker` SIGTERMed / SIGKILLed mid-job,
#                    with locks held and several jobs in flight
#   input_chaos   6  bad input: garbage on the unlock and jobs topics, odd
#                    lock names, broken config files, abusive CLI arguments
# Real processes throughout: `lockfleet worker`, `lockfleet broker`, a
# private redis-server. CTest names carry the prefix (worker_chaos.Suite.Test)
# so `ctest -R 'worker_chaos|input_chaos'` selects them.
foreach(scenario worker input)
  set(target lockfleet_${scenario}_chaos_test)
  add_executable(${target} ${CMAKE_CURRENT_SOURCE_DIR}/${scenario}_chaos_test.cc)
  target_link_libraries(${target} PRIVATE
    lockfleet_worker_test_support lockfleet::worker lockfleet::metrics
    GTest::gtest_main)
  target_compile_definitions(${target} PRIVATE
    LOCKFLEET_CLI_PATH="$<TARGET_FILE:lockfleet_cli>")
  add_dependencies(${target} lockfleet_cli)
  lockfleet_set_warnings(${target})
  gtest_discover_tests(${target}
    TEST_PREFIX ${scenario}_chaos.
    PROPERTIES LABELS chaos TIMEOUT 120
    DISCOVERY_TIMEOUT 60)
endforeach()
