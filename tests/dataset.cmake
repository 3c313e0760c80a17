# Dataset listing (ImageFolder, manifest), subsets and confined reads.
galley_add_test(dataset_test
  SOURCES unit/dataset_test.cc
  LIBS galley_dataset)
