# Scenarios 5-7 of the fault-injection suite (docs/RELIABILITY.md):
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
    # 300: a takeover may wait up to 2 minutes on the embedded broker's
    # group coordinator (worker_chaos_test.cc); a pass takes ~15 s.
    PROPERTIES LABELS chaos TIMEOUT 300
    DISCOVERY_TIMEOUT 60)
endforeach()

# Scenario 7: a crash-looping worker, on the embedded broker and on a real
# Apache Kafka broker (kafka-local from ../shared/kafka beside the source
# tree, or LOCKFLEET_KAFKA_LOCAL; the real-broker case is skipped, saying
# why, when it or java is missing). The real-broker case runs on the ctest
# run's shared broker (the fixture real_kafka, ../CMakeLists.txt), on topics
# and a group of its own: a broker of its own cost its start, 40-80 s on a
# loaded CI machine.
add_executable(lockfleet_churn_chaos_test
  ${CMAKE_CURRENT_SOURCE_DIR}/churn_chaos_test.cc)
target_link_libraries(lockfleet_churn_chaos_test PRIVATE
  lockfleet_worker_test_support lockfleet::worker lockfleet::metrics
  GTest::gtest_main)
target_compile_definitions(lockfleet_churn_chaos_test PRIVATE
  LOCKFLEET_CLI_PATH="$<TARGET_FILE:lockfleet_cli>"
  LOCKFLEET_KAFKA_LOCAL_DEFAULT="${LOCKFLEET_KAFKA_LOCAL}")
add_dependencies(lockfleet_churn_chaos_test lockfleet_cli)
lockfleet_set_warnings(lockfleet_churn_chaos_test)
target_link_libraries(lockfleet_churn_chaos_test PRIVATE PkgConfig::rdkafka)
gtest_discover_tests(lockfleet_churn_chaos_test
  TEST_PREFIX churn_chaos.
  TEST_FILTER "-*RealKafka*"
  PROPERTIES LABELS chaos TIMEOUT 300 COST 100
  DISCOVERY_TIMEOUT 60)
gtest_discover_tests(lockfleet_churn_chaos_test
  TEST_PREFIX churn_chaos.
  TEST_FILTER "*RealKafka*"
  PROPERTIES LABELS chaos TIMEOUT 300 COST 150
             FIXTURES_REQUIRED real_kafka
             ENVIRONMENT "LOCKFLEET_SHARED_KAFKA=${LOCKFLEET_SHARED_KAFKA_DIR}"
  DISCOVERY_TIMEOUT 60)
