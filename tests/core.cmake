# Wire protocol, client and daemon tests.
galley_add_test(protocol_test SOURCES unit/protocol_test.cc LIBS galley_wire)
