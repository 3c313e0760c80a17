// galleyd's registry over shard sets kept as objects (an in-memory store):
// a job's endpoint must be one of allowed_s3_endpoints, its access travels
// with it, and a job sharing a listing another job's credentials made is
// served only once its own credentials HEADed every shard.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "galley/daemon/daemon_options.h"
#include "galley/daemon/dataset_registry.h"
#include "galley/daemon/shard_datasets.h"
#include "tests/unit/objectstore/in_memory_object_store.h"
#include "tests/unit/tar_writer.h"

namespace galley {
namespace {

using testing::InMemoryObjectStore;

class ObjectDatasetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_shared<InMemoryObjectStore>();
    store_->Allow("data", "alice");
    store_->Allow("data", "bob");
    for (int s = 0; s < 4; ++s) {
      testing::TarWriter tar;
      for (int i = 0; i < 5; ++i) {
        const std::string key = "k" + std::to_string(s) + "_" + std::to_string(i);
        tar.Add(key + ".jpg", "jpeg bytes of " + key).Add(key + ".cls", std::to_string(i));
      }
      store_->Put("data", "in/train-" + std::to_string(s) + ".tar", tar.Finish());
      shards_.push_back("s3://data/in/train-" + std::to_string(s) + ".tar");
    }
    DaemonOptions daemon;
    daemon.tar_index_dir = "none";
    daemon.allowed_s3_endpoints = {"http://127.0.0.1:9000/"};
    DatasetRegistryOptions options = DatasetRegistryOptions::From(daemon);
    options.object_store = store_;
    registry_ = std::make_unique<DatasetRegistry>(options);
  }

  JobSpec Spec(const std::string& key_id) const {
    JobSpec spec;
    spec.dataset = shards_.front();
    spec.shards = shards_;
    spec.batch_size = 2;
    ObjectStoreAccess access;
    access.endpoint_url = "http://127.0.0.1:9000";
    access.path_style = true;
    access.access_key_id = key_id;
    access.secret_access_key = "secret-of-" + key_id;
    spec.s3 = access;
    return spec;
  }

  Result<OpenedDataset> Open(const JobSpec& spec) {
    Credentials me{::geteuid(), ::getegid(), {}};
    return registry_->Open(spec, me, [](const Dataset& dataset) {
      std::vector<ItemId> all(dataset.size());
      for (ItemId id = 0; id < all.size(); ++id) all[id] = id;
      return Result<std::vector<ItemId>>(std::move(all));
    });
  }

  std::shared_ptr<InMemoryObjectStore> store_;
  std::vector<std::string> shards_;
  std::unique_ptr<DatasetRegistry> registry_;
};

TEST_F(ObjectDatasetsTest, AnEndpointOutsideTheAllowedListIsRefusedSayingTheAdminMustAddIt) {
  JobSpec spec = Spec("alice");
  spec.s3->endpoint_url = "http://10.9.9.9:9000";
  auto opened = Open(spec);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(opened.status().message().find(
                "the S3 endpoint http://10.9.9.9:9000 is not one this galleyd may read from; the "
                "node's admin must add it to allowed_s3_endpoints"),
            std::string::npos)
      << opened.status().message();
  EXPECT_EQ(store_->counters().heads.load(), 0u);  // nothing asked of any store
}

TEST_F(ObjectDatasetsTest, ObjectsWithoutTheJobsAccessOrMixedWithFilesAreRefused) {
  JobSpec spec = Spec("alice");
  spec.s3.reset();
  EXPECT_EQ(Open(spec).status().code(), StatusCode::kInvalidArgument);
  spec = Spec("alice");
  spec.shards.push_back("/data/train-9.tar");
  auto mixed = Open(spec);
  EXPECT_EQ(mixed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mixed.status().message().find("mixes s3:// objects and files"), std::string::npos);
}

TEST_F(ObjectDatasetsTest, ASecondJobHeadsEveryShardWithItsOwnCredentialsBeforeSharing) {
  auto first = Open(Spec("alice"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->dataset->size(), 20u);
  const uint64_t heads = store_->counters().heads.load();
  const uint64_t gets = store_->counters().gets.load();

  auto second = Open(Spec("bob"));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->dataset.get(), first->dataset.get());  // one listing, shared
  EXPECT_EQ(store_->counters().heads.load() - heads, 4u);  // one HEAD per shard
  EXPECT_EQ(store_->counters().gets.load(), gets);         // nothing listed again

  auto refused = Open(Spec("mallory"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("s3://data/in/train-"), std::string::npos);
  EXPECT_EQ(refused.status().message().find("secret-of-mallory"), std::string::npos);
  EXPECT_EQ(store_->counters().gets.load(), gets);
}

TEST_F(ObjectDatasetsTest, AnObjectChangedBeforeAJobOpensIsListedAgainWithThatJobsCredentials) {
  auto first = Open(Spec("alice"));
  ASSERT_TRUE(first.ok());
  testing::TarWriter tar;
  tar.Add("new.jpg", "jpeg").Add("new.cls", "1");
  store_->Put("data", "in/train-3.tar", tar.Finish());
  auto second = Open(Spec("bob"));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_NE(second->dataset.get(), first->dataset.get());
  EXPECT_EQ(second->dataset->size(), 16u);
  EXPECT_TRUE(first->dataset->stale());
}

TEST_F(ObjectDatasetsTest, TheEndpointIsPartOfTheSharingKeyAndTheCredentialsAreNot) {
  EXPECT_TRUE(EndpointAllowed("http://127.0.0.1:9000", {"http://127.0.0.1:9000/"}));
  EXPECT_FALSE(EndpointAllowed("http://127.0.0.1:9001", {"http://127.0.0.1:9000"}));
  EXPECT_TRUE(EndpointAllowed("https://s3.eu-west-1.amazonaws.com", {"aws"}));
  EXPECT_FALSE(EndpointAllowed("https://s3.eu-west-1.amazonaws.com.evil.example", {"aws"}));
  EXPECT_FALSE(EndpointAllowed("http://127.0.0.1:9000", {}));
  const std::string a = Dataset::ShardSetKey(shards_, {}, "http://127.0.0.1:9000");
  const std::string b = Dataset::ShardSetKey(shards_, {}, "http://127.0.0.2:9000");
  EXPECT_NE(a, b);
}

// A prefix read as an ImageFolder: one listing per endpoint and prefix,
// shared by a second job of the same access key on its own LIST, and by a
// job of another key once it HEADed every object.
TEST_F(ObjectDatasetsTest, APrefixFolderIsSharedByTheSameKeyOnItsListAndByAnotherAfterHeads) {
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 4; ++i) {
      const std::string key = "folder/c" + std::to_string(c) + "/" + std::to_string(i) + ".jpg";
      store_->Put("data", key, std::vector<uint8_t>(10 + i, static_cast<uint8_t>(c)));
    }
  }
  auto spec_of = [&](const std::string& key_id) {
    JobSpec spec = Spec(key_id);
    spec.shards.clear();
    spec.dataset = "s3://data/folder/";
    return spec;
  };
  auto first = Open(spec_of("alice"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->dataset->size(), 12u);
  EXPECT_EQ(first->dataset->classes(), (std::vector<std::string>{"c0", "c1", "c2"}));
  const uint64_t heads = store_->counters().heads.load();
  const uint64_t lists = store_->counters().lists.load();

  auto again = Open(spec_of("alice"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->dataset.get(), first->dataset.get());
  EXPECT_EQ(store_->counters().lists.load() - lists, 1u);
  EXPECT_EQ(store_->counters().heads.load(), heads);

  auto other = Open(spec_of("bob"));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(other->dataset.get(), first->dataset.get());
  EXPECT_EQ(store_->counters().heads.load() - heads, 12u);

  auto refused = Open(spec_of("mallory"));
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.status().message().find("mallory"), std::string::npos);

  // Another endpoint is another dataset.
  JobSpec elsewhere = spec_of("alice");
  elsewhere.s3->endpoint_url = "http://127.0.0.2:9000";
  EXPECT_EQ(Open(elsewhere).status().code(), StatusCode::kPermissionDenied);  // not allowed
}

TEST_F(ObjectDatasetsTest, WithPerKeySharingAnotherAccessKeyListsAFolderOfItsOwnWithoutHeads) {
  for (int i = 0; i < 6; ++i) {
    store_->Put("data", "pk/c" + std::to_string(i % 2) + "/" + std::to_string(i) + ".png", {1});
  }
  DaemonOptions daemon;
  daemon.tar_index_dir = "none";
  daemon.allowed_s3_endpoints = {"http://127.0.0.1:9000"};
  daemon.s3_folder_sharing = "per_key";
  DatasetRegistryOptions options = DatasetRegistryOptions::From(daemon);
  options.object_store = store_;
  registry_ = std::make_unique<DatasetRegistry>(options);
  auto spec_of = [&](const std::string& key_id) {
    JobSpec spec = Spec(key_id);
    spec.shards.clear();
    spec.dataset = "s3://data/pk/";
    return spec;
  };
  auto alice = Open(spec_of("alice"));
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  auto alice_again = Open(spec_of("alice"));
  ASSERT_TRUE(alice_again.ok());
  EXPECT_EQ(alice_again->dataset.get(), alice->dataset.get());
  const uint64_t heads = store_->counters().heads.load();
  auto bob = Open(spec_of("bob"));
  ASSERT_TRUE(bob.ok());
  EXPECT_NE(bob->dataset.get(), alice->dataset.get());  // a listing of its own
  EXPECT_EQ(store_->counters().heads.load(), heads);    // and no HEAD per object
  EXPECT_EQ(registry_->size(), 2u);
  for (const DatasetSnapshot& listed : registry_->Snapshot()) {
    EXPECT_EQ(listed.key.find("alice"), std::string::npos) << listed.key;
    EXPECT_EQ(listed.key.find("bob"), std::string::npos) << listed.key;
  }
}

TEST_F(ObjectDatasetsTest, AGlobOverShardsIsExpandedByTheJobsListAndSharedWithTheSameList) {
  JobSpec spec = Spec("alice");
  spec.shards = {"s3://data/in/train-*.tar"};
  auto globbed = Open(spec);
  ASSERT_TRUE(globbed.ok()) << globbed.status().ToString();
  EXPECT_EQ(globbed->dataset->size(), 20u);
  auto listed = Open(Spec("alice"));  // the four URLs spelt out
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->dataset.get(), globbed->dataset.get());

  spec.shards = {"s3://data/in/val-*.tar"};
  auto none = Open(spec);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(), "no object matches 's3://data/in/val-*.tar'");
}

TEST_F(ObjectDatasetsTest, ALocalManifestNamingObjectsIsReadWithTheJobsAccess) {
  char pattern[] = "/tmp/galley-object-manifest-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  store_->Put("data", "pics/a.jpg", {1, 2, 3});
  store_->Put("data", "pics/b.jpg", {4, 5});
  const std::string manifest = dir + "/train.csv";
  {
    std::ofstream out(manifest);
    out << "image,label\ns3://data/pics/a.jpg,3\ns3://data/pics/b.jpg,1\n";
  }
  JobSpec spec = Spec("alice");
  spec.shards.clear();
  spec.dataset = manifest;
  auto opened = Open(spec);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_EQ(opened->dataset->size(), 2u);
  EXPECT_EQ(opened->dataset->label(0), 3);
  EXPECT_EQ(*opened->dataset->Read(1), (std::vector<uint8_t>{4, 5}));
  auto refused = Open([&] {
    JobSpec s = spec;
    s.s3->access_key_id = "mallory";
    return s;
  }());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  // The manifest rewritten: the next job gets the new listing.
  {
    std::ofstream out(manifest);
    out << "image,label\ns3://data/pics/b.jpg,7\n";
  }
  auto rewritten = Open(spec);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_NE(rewritten->dataset.get(), opened->dataset.get());
  ASSERT_EQ(rewritten->dataset->size(), 1u);
  EXPECT_EQ(rewritten->dataset->label(0), 7);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace galley
