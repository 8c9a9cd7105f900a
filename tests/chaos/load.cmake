# Scenario 7, sustained load: `lockfleet bench` drives 8 processes x 8
# threads on 100 locks for 60 s against a test-started redis-server and a
# `lockfleet broker`; no violation, stable memory, no descriptor or Redis
# connection leaks.
lockfleet_add_test(NAME lockfleet_load_chaos_test
  SOURCES load_chaos_test.cc
  LIBS lockfleet_cli_test_support nlohmann_json::nlohmann_json
  LABELS chaos
  TIMEOUT 300)
add_dependencies(lockfleet_load_chaos_test lockfleet_cli)
lockfleet_test_cost(lockfleet_load_chaos_test 100
  LoadChaosTest.SustainedLoadKeepsExclusionMemoryAndDescriptors)
