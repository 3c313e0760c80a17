# The pages of galleyd's "listing" request.
galley_add_test(dataset_listing_test SOURCES unit/dataset_listing_test.cc LIBS galley_daemon)
