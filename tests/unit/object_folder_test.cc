// Images kept one per object (ObjectFolderSource) over an in-memory store: a
// prefix lists as torchvision lists the same tree on disk (classes, labels,
// order, the same errors), every page of the listing is asked for, a
// manifest object names its images by relative keys or URLs, a glob over
// s3:// matches as Python's glob, a changed object is DataLoss, refused
// credentials get nothing, a prefetched wave keeps many GETs in flight, and
// the rule for sharing with other credentials: the job's own LIST always,
// no HEAD for an access key already admitted, a HEAD per object for another;
// a client gone during its listing or admission stops their requests.
#include "server/dataset/object_folder.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "galley/dataset/dataset.h"
#include "galley/dataset/file_source.h"
#include "galley/dataset/listing_stop.h"
#include "server/dataset/object_shards.h"
#include "tests/unit/objectstore/in_memory_object_store.h"
#include "tests/unit/objectstore/object_test_support.h"

namespace galley {
namespace {

namespace fs = std::filesystem;
using testing::AccessFor;
using testing::InMemoryObjectStore;

std::vector<uint8_t> BytesOf(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

// A tree of an ImageFolder's awkward cases: classes whose names sort by
// byte (upper case first), a nested folder, files that are no images, a
// file beside the class folders, extensions in upper case.
const std::vector<std::string> kTree = {
    "b/x2.jpg",       "b/x10.png",    "b/notes.txt",  "a/sub/z.jpeg", "a/sub b/y.JPG",
    "a/y.jpg",        "a/sub/a.webp", "Zeta/q.bmp",   "readme.md",    "a/x.tif",
    "b/deep/e/f.ppm", "a_b/k.pgm",    "a/.hidden.png"};

class ObjectFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_shared<InMemoryObjectStore>();
    store_->Allow("data", "alice");
    store_->Allow("data", "bob");
    store_->Allow("data", "carol");
    for (const std::string& key : kTree) store_->Put("data", "imgs/" + key, BytesOf("px " + key));
  }

  Result<std::shared_ptr<const Dataset>> Open(const std::string& url,
                                              const std::string& key_id = "alice") {
    return Dataset::OpenObjectFolder(url, store_, AccessFor(key_id), options_, {});
  }

  testing::ScratchDir dir_{"galley-object-folder"};
  std::shared_ptr<InMemoryObjectStore> store_;
  ShardOptions options_;
};

TEST_F(ObjectFolderTest, APrefixListsAsTorchvisionListsTheSameTreeOnDisk) {
  for (const std::string& key : kTree) {
    fs::create_directories((dir_.path() / key).parent_path());
    std::ofstream(dir_.path() / key) << "px " << key;
  }
  auto local = Dataset::Open(dir_.path(), {});
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  store_->set_list_page_keys(4);  // 13 keys: four pages
  auto objects = Open("s3://data/imgs/");
  ASSERT_TRUE(objects.ok()) << objects.status().ToString();
  EXPECT_EQ(store_->counters().lists.load(), 4u);
  EXPECT_EQ(store_->counters().heads.load(), 0u);  // a trailing '/': a prefix, no HEAD
  EXPECT_EQ(store_->counters().gets.load(), 0u);   // nothing read to list
  const Dataset& o = **objects;
  const Dataset& l = **local;
  ASSERT_EQ(o.size(), l.size());
  EXPECT_EQ(o.classes(), l.classes());
  EXPECT_EQ(o.classes(), (std::vector<std::string>{"Zeta", "a", "a_b", "b"}));
  for (ItemId id = 0; id < o.size(); ++id) {
    EXPECT_EQ(o.name(id), l.name(id)) << id;
    EXPECT_EQ(o.label(id), l.label(id)) << id;
    EXPECT_EQ(o.path(id).string(), "s3://data/imgs/" + o.name(id));
    auto bytes = o.Read(id);
    auto local_bytes = l.Read(id);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_EQ(*bytes, *local_bytes);
  }
  EXPECT_EQ(o.total_bytes(), l.total_bytes());
  EXPECT_TRUE(o.reads_objects());

  // Without the trailing '/': no object of that name, so the prefix.
  auto no_slash = Open("s3://data/imgs");
  ASSERT_TRUE(no_slash.ok()) << no_slash.status().ToString();
  EXPECT_EQ((*no_slash)->size(), o.size());
  EXPECT_EQ((*no_slash)->content_fingerprint(), o.content_fingerprint());
}

TEST_F(ObjectFolderTest, NoClassFolderAnEmptyClassAndAnEmptyPrefixAreRefusedAsLocally) {
  store_->Put("data", "flat/one.jpg", BytesOf("1"));
  auto flat = Open("s3://data/flat/");
  ASSERT_FALSE(flat.ok());
  EXPECT_EQ(flat.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(flat.status().message(), "no class folders in s3://data/flat/");

  store_->Put("data", "some/cat/a.jpg", BytesOf("1"));
  store_->Put("data", "some/dog/a.txt", BytesOf("1"));
  auto empty_class = Open("s3://data/some/");
  ASSERT_FALSE(empty_class.ok());
  EXPECT_EQ(empty_class.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty_class.status().message().find("class folder 'dog' has no image files"),
            std::string::npos)
      << empty_class.status().message();

  auto none = Open("s3://data/nothing-here/");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("s3://data/nothing-here/"), std::string::npos);
}

TEST_F(ObjectFolderTest, RefusedCredentialsGetPermissionDeniedAndNoBytes) {
  auto refused = Open("s3://data/imgs/", "mallory");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("s3://data/imgs/"), std::string::npos);
  EXPECT_EQ(refused.status().message().find("mallory"), std::string::npos);
  EXPECT_EQ(store_->counters().bytes.load(), 0u);
  EXPECT_EQ(store_->counters().gets.load(), 0u);
}

TEST_F(ObjectFolderTest, AnObjectChangedSinceTheListingIsDataLossAndMakesTheListingStale) {
  auto objects = Open("s3://data/imgs/");
  ASSERT_TRUE(objects.ok());
  const Dataset& o = **objects;
  ItemId changed = 0;
  while (o.name(changed) != "a/y.jpg") ++changed;
  store_->Put("data", "imgs/a/y.jpg", BytesOf("other pixels"));
  auto read = o.Read(changed);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(read.status().message().find("s3://data/imgs/a/y.jpg changed since it was listed"),
            std::string::npos)
      << read.status().message();
  EXPECT_TRUE(o.stale());
  EXPECT_TRUE(o.Read(changed == 0 ? 1 : 0).ok());  // the others still read
}

TEST_F(ObjectFolderTest, APrefetchedWaveKeepsTheBoundOfGetsInFlightAndServesEachRead) {
  for (int i = 0; i < 40; ++i) {
    store_->Put("data", "many/c" + std::to_string(i % 4) + "/" + std::to_string(i) + ".jpg",
                BytesOf(std::string(100 + i, 'p')));
  }
  options_.object_requests_in_flight = 8;
  auto objects = Open("s3://data/many/");
  ASSERT_TRUE(objects.ok());
  const Dataset& o = **objects;
  std::vector<ItemId> wave(o.size());
  for (ItemId id = 0; id < wave.size(); ++id) wave[id] = id;
  store_->Hold();
  o.Prefetch(wave);
  store_->WaitForInFlight(8);
  EXPECT_EQ(store_->counters().gets.load(), 8u);
  store_->Release();
  for (ItemId id : wave) {
    auto bytes = o.Read(id);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  }
  // One GET per object, none twice; never more than the bound at once.
  EXPECT_EQ(store_->counters().gets.load(), 40u);
  EXPECT_EQ(store_->max_in_flight(), 8u);
  // The folder's own counts: every read prefetched, by the store's GETs and
  // bytes, after the one listing of its one prefix.
  std::optional<ObjectFolderCounts> counts = o.object_folder_counts();
  ASSERT_TRUE(counts.has_value());
  EXPECT_FALSE(counts->manifest);
  EXPECT_EQ(counts->prefixes, 1u);
  EXPECT_EQ(counts->listings, 1u);
  EXPECT_EQ(counts->reads.prefetched, 40u);
  EXPECT_EQ(counts->reads.on_demand, 0u);
  EXPECT_EQ(counts->reads.gets, 40u);
  EXPECT_EQ(counts->reads.bytes, store_->counters().bytes.load());
  EXPECT_EQ(counts->reads.bytes, o.total_bytes());
  // A read no wave named: a GET of its own.
  ASSERT_TRUE(o.Read(3).ok());
  counts = o.object_folder_counts();
  EXPECT_EQ(counts->reads.on_demand, 1u);
  EXPECT_EQ(counts->reads.gets, 41u);
  EXPECT_EQ(counts->reads.bytes, store_->counters().bytes.load());
}

TEST_F(ObjectFolderTest, AManifestObjectNamesItsImagesByRelativeKeysAndUrls) {
  store_->Allow("other", "alice");
  store_->Put("other", "far/away.png", BytesOf("px far"));
  store_->Put("data", "imgs/train.csv",
              BytesOf("image,label\na/y.jpg,cat\nb/x2.jpg,dog\ns3://other/far/away.png,cat\n"));
  auto objects = Open("s3://data/imgs/train.csv");
  ASSERT_TRUE(objects.ok()) << objects.status().ToString();
  const Dataset& o = **objects;
  ASSERT_EQ(o.size(), 3u);
  EXPECT_EQ(o.classes(), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(o.label(0), 0);
  EXPECT_EQ(o.label(1), 1);
  EXPECT_EQ(o.label(2), 0);
  EXPECT_EQ(o.path(0).string(), "s3://data/imgs/a/y.jpg");
  EXPECT_EQ(o.path(2).string(), "s3://other/far/away.png");
  auto far = o.Read(2);
  auto near = o.Read(1);
  ASSERT_TRUE(far.ok() && near.ok());
  EXPECT_EQ(std::string(far->begin(), far->end()), "px far");
  EXPECT_EQ(std::string(near->begin(), near->end()), "px b/x2.jpg");
  // One HEAD (the manifest), one LIST per folder of its objects, no HEAD
  // per object.
  EXPECT_EQ(store_->counters().heads.load(), 1u);
  EXPECT_EQ(store_->counters().lists.load(), 3u);
  // As the manifest counts them: the manifest's GET at open is not a read.
  const std::optional<ObjectFolderCounts> counts = o.object_folder_counts();
  ASSERT_TRUE(counts.has_value());
  EXPECT_TRUE(counts->manifest);
  EXPECT_EQ(counts->prefixes, 3u);
  EXPECT_EQ(counts->listings, 3u);
  EXPECT_EQ(counts->manifest_heads, 1u);
  EXPECT_EQ(counts->reads.on_demand, 2u);
  EXPECT_EQ(counts->reads.gets, 2u);
  EXPECT_EQ(counts->reads.bytes, far->size() + near->size());
  EXPECT_EQ(store_->counters().gets.load(), 3u);

  store_->Put("data", "imgs/bad.csv", BytesOf("image,label\n../up.jpg,cat\n"));
  auto leaving = Open("s3://data/imgs/bad.csv");
  ASSERT_FALSE(leaving.ok());
  EXPECT_EQ(leaving.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(leaving.status().message().find("s3://data/imgs/bad.csv:2: key '../up.jpg' leaves"),
            std::string::npos)
      << leaving.status().message();
  store_->Put("data", "imgs/missing.csv", BytesOf("image,label\na/none.jpg,cat\n"));
  auto missing = Open("s3://data/imgs/missing.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("object s3://data/imgs/a/none.jpg does not exist"),
            std::string::npos)
      << missing.status().message();
}

TEST_F(ObjectFolderTest, AGlobMatchesKeysAsPythonsGlobMatchesPathsSorted) {
  for (const char* key : {"train-1.tar", "train-0.tar", "sub/train-2.tar", ".train-3.tar",
                          "train-x.txt", "val-0.tar"}) {
    store_->Put("data", key, BytesOf("t"));
  }
  auto top = Dataset::ExpandObjectGlob("s3://data/train-*.tar", *store_, AccessFor("alice"));
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(*top, (std::vector<std::string>{"s3://data/train-0.tar", "s3://data/train-1.tar"}));
  auto nested = Dataset::ExpandObjectGlob("s3://data/*/train-?.tar", *store_, AccessFor("alice"));
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(*nested, (std::vector<std::string>{"s3://data/sub/train-2.tar"}));
  auto classes = Dataset::ExpandObjectGlob("s3://data/[tv]*-0.tar", *store_, AccessFor("alice"));
  ASSERT_TRUE(classes.ok());
  EXPECT_EQ(*classes, (std::vector<std::string>{"s3://data/train-0.tar", "s3://data/val-0.tar"}));
  auto none = Dataset::ExpandObjectGlob("s3://data/test-*.tar", *store_, AccessFor("alice"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(), "no object matches 's3://data/test-*.tar'");
  auto refused = Dataset::ExpandObjectGlob("s3://data/train-*.tar", *store_, AccessFor("eve"));
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
}

TEST_F(ObjectFolderTest, TheSameKeySharesByItsListAnotherHeadsEachObjectOneObjectRefusedIsDenied) {
  auto objects = Open("s3://data/imgs/");
  ASSERT_TRUE(objects.ok());
  const Dataset& o = **objects;
  const uint64_t images = o.size();
  auto requests = [&] {
    return std::make_pair(store_->counters().lists.load(), store_->counters().heads.load());
  };
  bool changed = true;

  // The access key that listed it: its own LIST, no HEAD.
  auto before = requests();
  ASSERT_TRUE(o.VerifyObjects(AccessFor("alice"), &changed, nullptr).ok());
  EXPECT_FALSE(changed);
  EXPECT_EQ(requests().first - before.first, 1u);
  EXPECT_EQ(requests().second - before.second, 0u);

  // Another key: its LIST and a HEAD per object; admitted after.
  before = requests();
  ASSERT_TRUE(o.VerifyObjects(AccessFor("bob"), &changed, nullptr).ok());
  EXPECT_FALSE(changed);
  EXPECT_EQ(requests().first - before.first, 1u);
  EXPECT_EQ(requests().second - before.second, images);
  before = requests();
  ASSERT_TRUE(o.VerifyObjects(AccessFor("bob"), &changed, nullptr).ok());
  EXPECT_EQ(requests().second - before.second, 0u);
  // Later reads are signed with the newest admitted key.
  ASSERT_TRUE(o.Read(0).ok());
  EXPECT_EQ(store_->last_get_key_id(), "bob");

  // A key that may list the bucket but not read one object: refused,
  // naming the object, and not admitted.
  store_->DenyObject("data", "imgs/b/x10.png", "carol");
  Status denied = o.VerifyObjects(AccessFor("carol"), &changed, nullptr);
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("s3://data/imgs/b/x10.png"), std::string::npos)
      << denied.message();
  before = requests();
  EXPECT_FALSE(o.VerifyObjects(AccessFor("carol"), &changed, nullptr).ok());
  EXPECT_EQ(requests().second - before.second, images);

  // A key that may not list: refused at its LIST, before any HEAD.
  before = requests();
  Status unlisted = o.VerifyObjects(AccessFor("mallory"), &changed, nullptr);
  EXPECT_EQ(unlisted.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(requests().second - before.second, 0u);

  // What the folder counts of it: the open's LIST and each VerifyObjects',
  // and the HEADs of every key but the lister's (bob's, carol's twice).
  const std::optional<ObjectFolderCounts> counts = o.object_folder_counts();
  ASSERT_TRUE(counts.has_value());
  EXPECT_EQ(counts->listings, 7u);
  EXPECT_EQ(counts->reads.verify_heads, 3 * images);
  EXPECT_EQ(counts->manifest_heads, 0u);
  EXPECT_EQ(counts->reads.verify_heads, store_->counters().heads.load());
  EXPECT_EQ(counts->listings, store_->counters().lists.load());

  // A key added under the prefix: the listing is no longer what it lists.
  store_->Put("data", "imgs/a/new.jpg", BytesOf("new"));
  ASSERT_TRUE(o.VerifyObjects(AccessFor("alice"), &changed, nullptr).ok());
  EXPECT_TRUE(changed);
  EXPECT_TRUE(o.stale());
}

// 200 images under s3://data/many/, listed 10 keys a page.
void PutMany(InMemoryObjectStore& store) {
  for (int i = 0; i < 200; ++i) {
    store.Put("data", "many/c/" + std::to_string(1000 + i) + ".jpg", BytesOf("px"));
  }
  store.set_list_page_keys(10);
}

// The two ends of a job's control connection: galleyd's, which a
// ListingStop watches, and the client's, which the test closes.
struct Connection {
  Connection() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0); }
  ~Connection() {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  }
  void CloseClient() {
    ::close(fds[1]);
    fds[1] = -1;
  }
  // The client closes its end as `store` is asked for LIST page `page`.
  void CloseClientAtListPage(InMemoryObjectStore& store, uint64_t page) {
    store.set_on_list_page([this, page](uint64_t pages) {
      if (pages == page) CloseClient();
    });
  }
  int fds[2] = {-1, -1};
};

TEST_F(ObjectFolderTest, AClientGoneDuringTheListingStopsItsListPagesAndANewJobListsAfresh) {
  PutMany(*store_);
  Connection connection;
  ListingStop stop(nullptr, connection.fds[0]);
  // The client goes away while the second page is asked for, the first
  // page's keys taken.
  connection.CloseClientAtListPage(*store_, 2);
  ManifestOptions manifest;
  manifest.stop = &stop;
  auto cancelled =
      Dataset::OpenObjectFolder("s3://data/many/", store_, AccessFor("alice"), options_, manifest);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
  EXPECT_NE(cancelled.status().message().find("the client that asked for it has gone"),
            std::string::npos)
      << cancelled.status().message();
  EXPECT_EQ(store_->counters().lists.load(), 2u);  // no page after the one in flight
  store_->set_on_list_page(nullptr);
  // Nothing was kept of it: the next job lists the prefix, all 20 pages.
  auto listed = Open("s3://data/many/");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ((*listed)->size(), 200u);
  EXPECT_EQ(store_->counters().lists.load(), 2u + 20u);
}

TEST_F(ObjectFolderTest, AClientGoneDuringItsAdmissionHeadsStopsThemAndAdmitsNothing) {
  PutMany(*store_);
  auto objects = Open("s3://data/many/");
  ASSERT_TRUE(objects.ok());
  const Dataset& o = **objects;
  Connection connection;
  ListingStop stop(nullptr, connection.fds[0]);
  const uint64_t heads = store_->counters().heads.load();
  // Bob's job goes away as its first HEAD is sent.
  store_->set_on_head([&](uint64_t sent) {
    if (sent == heads + 1) connection.CloseClient();
  });
  bool changed = true;
  Status cancelled = o.VerifyObjects(AccessFor("bob"), &changed, &stop);
  EXPECT_EQ(cancelled.code(), StatusCode::kCancelled) << cancelled.ToString();
  EXPECT_FALSE(changed);
  // Each HEAD thread sends at most the one it had started: far from 200.
  EXPECT_LE(store_->counters().heads.load() - heads, ObjectShards::kDefaultHeadsInFlight);
  store_->set_on_head(nullptr);
  // Alice's job is served as before, with her credentials.
  ASSERT_TRUE(o.Read(0).ok());
  EXPECT_EQ(store_->last_get_key_id(), "alice");
  EXPECT_FALSE(o.stale());
  // Bob was not admitted: his next job HEADs every object, and is.
  const uint64_t before = store_->counters().heads.load();
  ASSERT_TRUE(o.VerifyObjects(AccessFor("bob"), &changed, nullptr).ok());
  EXPECT_FALSE(changed);
  EXPECT_EQ(store_->counters().heads.load() - before, 200u);
  ASSERT_TRUE(o.Read(1).ok());
  EXPECT_EQ(store_->last_get_key_id(), "bob");
}

TEST_F(ObjectFolderTest, AGlobsListingStopsWhenItsClientHasGone) {
  PutMany(*store_);
  Connection connection;
  ListingStop stop(nullptr, connection.fds[0]);
  connection.CloseClientAtListPage(*store_, 2);
  auto cancelled =
      Dataset::ExpandObjectGlob("s3://data/many/c/1*.jpg", *store_, AccessFor("alice"), &stop);
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(store_->counters().lists.load(), 2u);  // of 20 pages
}

}  // namespace
}  // namespace galley
