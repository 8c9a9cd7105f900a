# Scenarios 1-2 (docs/RELIABILITY.md): a lock holder SIGKILLed while holding,
# and one SIGSTOPped past its lease then resumed. The holders and waiters are
# lockfleet_chaos_holder processes (the real library in a process of its
# own) and `lockfleet lock`.
add_executable(lockfleet_chaos_holder chaos_holder.cc)
target_link_libraries(lockfleet_chaos_holder PRIVATE
  lockfleet::lockcore lockfleet::notifier)
lockfleet_set_warnings(lockfleet_chaos_holder)

lockfleet_add_test(NAME lockfleet_holder_chaos_test
  SOURCES holder_chaos_test.cc
  LABELS chaos
  LIBS lockfleet_cli_test_support lockfleet::notifier
  TIMEOUT 180)
target_compile_definitions(lockfleet_holder_chaos_test PRIVATE
  LOCKFLEET_CHAOS_HOLDER_PATH="$<TARGET_FILE:lockfleet_chaos_holder>")
add_dependencies(lockfleet_holder_chaos_test
  lockfleet_chaos_holder lockfleet_cli)
