# Chaos scenarios 3-4: the Kafka broker killed / frozen / set down, and Redis
# restarted / stalled / its connections killed, during contention
# (docs/RELIABILITY.md). fault_harness: nodes wired as `lockfleet worker`
# wires them, contending threads, and the independent safety check.
add_library(lockfleet_chaos_fault_harness STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/fault_harness.cc)
target_include_directories(lockfleet_chaos_fault_harness
  PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/..)
target_link_libraries(lockfleet_chaos_fault_harness
  PUBLIC lockfleet::lockcore lockfleet::notifier)
lockfleet_set_warnings(lockfleet_chaos_fault_harness)

lockfleet_add_test(NAME lockfleet_kafka_fault_chaos_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/kafka_fault_chaos_test.cc
  LABELS chaos
  LIBS lockfleet_chaos_fault_harness lockfleet_cli_test_support
       lockfleet::notifier
  TIMEOUT 300)
add_dependencies(lockfleet_kafka_fault_chaos_test lockfleet_cli)

lockfleet_add_test(NAME lockfleet_redis_fault_chaos_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/redis_fault_chaos_test.cc
  LABELS chaos
  LIBS lockfleet_chaos_fault_harness lockfleet_cli_test_support
       lockfleet::notifier lockfleet::worker
  TIMEOUT 300)
add_dependencies(lockfleet_redis_fault_chaos_test lockfleet_cli)
