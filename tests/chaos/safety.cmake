# Scenario group 8 (docs/RELIABILITY.md): lock safety at the edges.
# Forged and replayed unlock events while holders work (embedded broker), a
# Redis stall during force-unlock, a failover to a lagging replica (tokens,
# and a FencedResource in a separate durable Redis), and 200,000 distinct
# lock names (keys that never expire, memory). Real redis-server processes;
# the 200k-name test pipelines lockcore's own scripts with LockClient's keys,
# hence lockcore/src on the include path.
lockfleet_add_test(NAME lockfleet_safety_chaos_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/safety_chaos_test.cc
  LABELS chaos
  LIBS lockfleet_chaos_fault_harness lockfleet::notifier
  TIMEOUT 120)
target_include_directories(lockfleet_safety_chaos_test
  PRIVATE ${PROJECT_SOURCE_DIR}/lockcore/src)
lockfleet_test_cost(lockfleet_safety_chaos_test 30
  SafetyChaos.TwoHundredThousandLockNamesKeepMemoryBounded)

# 8e. The master killed under contention behind three real sentinels
# (redis+sentinel://, min_replicas 1): no double holder, no fence going
# backwards, and the clients follow the promoted replica.
lockfleet_add_test(NAME lockfleet_sentinel_chaos_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/sentinel_chaos_test.cc
  LABELS chaos
  TIMEOUT 180)

# 8f. A Redis Cluster changing under contention (redis+cluster://): a master
# killed and its replica promoted (min_replicas 1), and `redis-cli --cluster
# reshard` moving the hot locks' slots. No double holder, no fence going
# backwards, the clients following without a restart.
lockfleet_add_test(NAME lockfleet_cluster_chaos_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cluster_chaos_test.cc
  LABELS chaos
  TIMEOUT 240)
target_include_directories(lockfleet_cluster_chaos_test
  PRIVATE ${PROJECT_SOURCE_DIR}/lockcore/src)
