# Dataset listing (ImageFolder, manifest), subsets and confined reads.
galley_add_test(dataset_test
  SOURCES unit/dataset_test.cc
  LIBS galley_dataset galley_wire)

# What a hostile manifest can make a listing hold and do; stopped listings.
galley_add_test(hostile_manifest_test
  SOURCES unit/hostile_manifest_test.cc
  LIBS galley_dataset)

# The tar indexer, with a short run of its fuzz target, and shard fields.
galley_add_test(tar_index_test
  SOURCES unit/tar_index_test.cc fuzz/tar_index_fuzz.cc
  LIBS galley_dataset galley_wire)

# The process-wide cache of open shard descriptors.
galley_add_test(shard_descriptors_test
  SOURCES unit/shard_descriptors_test.cc
  LIBS galley_dataset)

# The memory an ImageFolder listing keeps per item: 100,000 hard links.
galley_add_test(listing_memory_test
  SOURCES unit/listing_memory_test.cc
  LIBS galley_dataset)

# Tar shards kept as objects, over an in-memory object store.
galley_add_test(object_shards_test
  SOURCES unit/object_shards_test.cc
  LIBS galley_dataset galley_wire)

# Images kept one per object (a prefix as an ImageFolder, a manifest
# object, globs over s3://), over an in-memory object store.
galley_add_test(object_folder_test
  SOURCES unit/object_folder_test.cc
  LIBS galley_dataset galley_wire)
