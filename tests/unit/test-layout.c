/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Placement of every driver: device sizes, the pieces map() cuts requests
 * into, that no two device bytes share a component byte, hand-computed md
 * layouts, and the attribute and component refusals users see. */
#include "config.h"

#include "driver.h"
#include "vb-error.h"

#define SECTOR 512
#define MAX_COMPONENTS 65 /* one more than any driver takes, for refusals */

/* One device to build: a driver, attributes and component sizes. */
typedef struct {
  const char *driver;
  const char *attributes[5]; /* key, value, ..., NULL */
  guint n_components;
  guint64 sizes[16];
  guint64 expected_size; /* computed by hand */
} Shape;

static const Shape shapes[] = {
  { "file", { NULL }, 1, { 10000 }, 9728 },
  { "file", { "sector_size", "4096", NULL }, 1, { 10000 }, 8192 },
  { "window", { "offset", "4096", NULL }, 1, { (1 << 20) + 100 }, 1044480 },
  { "window", { "offset", "8192", "size", "65536", NULL }, 1, { 1 << 20 }, 65536 },
  { "linear", { NULL }, 1, { 1 << 20 }, 1 << 20 },
  { "linear", { NULL }, 3, { 1000, 4096, 513 }, 5120 },
  { "linear", { NULL }, 5, { 65536, 12345, 512, 100000, 7 * 512 + 1 }, 181760 },
  { "raid0", { "chunk_size", "4096", NULL }, 2, { 65536, 65536 }, 131072 },
  { "raid0", { "chunk_size", "4096", NULL }, 3, { 3 * 4096 + 1000, 20000, 16484 }, 36864 },
  { "raid0",
    { "chunk_size", "64K", NULL },
    4,
    { 1 << 20, (1 << 20) + 5000, 2 << 20, 1 << 20 },
    4 << 20 },
  { "raid0", { NULL }, 2, { 3 << 20, 5 << 19 }, 5 << 20 },
  { "raid1", { NULL }, 1, { 10000 }, 8192 },
  { "raid1", { NULL }, 3, { (1 << 20) + 8191, 2 << 20, (1 << 20) + 4096 }, (1 << 20) + 4096 },
  { "raid1",
    { NULL },
    8,
    { 3 << 20, 4 << 20, (3 << 20) + 512, 5 << 20, 3 << 20, 3 << 20, 6 << 20, 3 << 20 },
    3 << 20 },
  { "raid10", { "chunk_size", "4096", NULL }, 3, { 16384, 16384, 16384 }, 24576 },
  { "raid10",
    { "chunk_size", "8192", "copies", "2", NULL },
    4,
    { 65536, 65536 + 100, 70000, 1 << 20 },
    131072 },
  { "raid10",
    { "chunk_size", "4096", "copies", "3", NULL },
    5,
    { 40960, 40960, 45000, 40960, 50000 },
    65536 },
  { "raid10", { "chunk_size", "4096", NULL }, 2, { 32768, 40000 }, 32768 },
  { "raid10",
    { "chunk_size", "4096", "copies", "8", NULL },
    8,
    { 20000, 20000, 20000, 20000, 20000, 20000, 20000, 20000 },
    16384 },
  /* 7 components, 3 copies: 4 rows of 7 slots hold 9 chunks, one slot spare */
  { "raid10",
    { "copies", "3", NULL },
    7,
    { 2 << 20, 2 << 20, 3 << 20, 2 << 20, (2 << 20) + 1, 2 << 20, 2 << 20 },
    9 << 19 },
};

static GHashTable *
attrs_from (const char *const *kv)
{
  GHashTable *h = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);

  for (guint i = 0; kv[i]; i += 2)
    g_hash_table_insert (h, g_strdup (kv[i]), g_strdup (kv[i + 1]));
  return h;
}

static void
fill_components (VbComponentInfo *infos, char names[][16], guint n, const guint64 *sizes)
{
  for (guint i = 0; i < n; i++)
    {
      g_snprintf (names[i], 16, "/c%u", i);
      infos[i].source = names[i];
      infos[i].kind = VB_COMPONENT_KIND_FILE;
      infos[i].size = sizes[i];
    }
}

/* Resolves, validates and lays out @shape; checks its size. */
static const VbDriver *
build (const Shape *shape, VbLayout *layout)
{
  const VbDriver *driver = vb_driver_lookup (shape->driver);
  g_autoptr (GHashTable) given = attrs_from (shape->attributes);
  g_autoptr (GHashTable) attributes = NULL;
  g_autoptr (GError) error = NULL;
  VbComponentInfo infos[MAX_COMPONENTS];
  char names[MAX_COMPONENTS][16];

  g_assert_nonnull (driver);
  g_assert_nonnull (driver->layout);
  g_assert_nonnull (driver->map);
  fill_components (infos, names, shape->n_components, shape->sizes);
  attributes = vb_driver_resolve_attributes (driver, NULL, given, &error);
  g_assert_no_error (error);
  g_assert_true (vb_driver_validate (driver, attributes, infos, shape->n_components, &error));
  g_assert_no_error (error);

  driver->layout (attributes, infos, shape->n_components, layout);
  g_assert_cmpuint (driver->size (attributes, infos, shape->n_components), ==,
                    shape->expected_size);
  g_assert_cmpuint (layout->size, ==, shape->expected_size);
  g_assert_cmpuint (layout->n_components, ==, shape->n_components);
  return driver;
}

static guint
expected_copies (const Shape *shape, const VbLayout *layout)
{
  if (g_str_equal (shape->driver, "raid1"))
    return shape->n_components;
  if (g_str_equal (shape->driver, "raid10"))
    return (guint) layout->copies;
  return 1;
}

/* Per component, how many device bytes (in sectors) each sector holds. */
typedef struct {
  guint8 *count[MAX_COMPONENTS];
} Usage;

/* Maps [@offset, +@length) piece by piece and checks every piece; counts
 * the component sectors it touches into @usage when given. */
static void
map_request (const Shape *shape, const VbDriver *driver, const VbLayout *layout, guint64 offset,
             guint64 length, Usage *usage)
{
  guint64 pos = offset, end = offset + length;
  guint copies = expected_copies (shape, layout);

  while (pos < end)
    {
      VbMapping m = { 0 };
      guint64 remaining = end - pos;
      gboolean seen[MAX_COMPONENTS] = { FALSE };

      driver->map (layout, pos, remaining, &m);
      /* contiguous, non-empty, whole sectors */
      g_assert_cmpuint (m.offset, ==, pos);
      g_assert_cmpuint (m.length, >, 0);
      g_assert_cmpuint (m.length, <=, remaining);
      g_assert_cmpuint (m.length % SECTOR, ==, 0);
      g_assert_cmpuint (m.n_copies, ==, copies);

      if (layout->chunk_size)
        {
          /* never across a chunk; cut only at one */
          g_assert_cmpuint (pos % layout->chunk_size + m.length, <=, layout->chunk_size);
          if (m.length < remaining)
            g_assert_cmpuint ((pos + m.length) % layout->chunk_size, ==, 0);
        }
      else if (g_str_equal (shape->driver, "raid1"))
        g_assert_cmpuint (m.length, ==, MIN (remaining, 1 << 20));
      else if (m.length < remaining)
        /* linear: cut only where a component ends */
        g_assert_cmpuint (m.copies[0].offset + m.length, ==,
                          layout->component_sizes[m.copies[0].component]);

      for (guint c = 0; c < m.n_copies; c++)
        {
          guint comp = m.copies[c].component;
          guint64 coff = m.copies[c].offset;

          g_assert_cmpuint (comp, <, layout->n_components);
          g_assert_false (seen[comp]); /* copies on distinct components */
          seen[comp] = TRUE;
          g_assert_cmpuint (coff % SECTOR, ==, 0);
          g_assert_cmpuint (coff + m.length, <=, layout->component_sizes[comp]);
          if (layout->chunk_size)
            g_assert_cmpuint (coff % layout->chunk_size, ==, pos % layout->chunk_size);
          if (usage)
            for (guint64 s = coff / SECTOR; s < (coff + m.length) / SECTOR; s++)
              usage->count[comp][s]++;
        }

      /* a piece places its bytes where single-sector requests place them */
      {
        guint64 k = (m.length / SECTOR) / 2 * SECTOR;
        VbMapping one = { 0 };

        driver->map (layout, pos + k, SECTOR, &one);
        g_assert_cmpuint (one.length, ==, SECTOR);
        g_assert_cmpuint (one.n_copies, ==, m.n_copies);
        for (guint c = 0; c < m.n_copies; c++)
          {
            g_assert_cmpuint (one.copies[c].component, ==, m.copies[c].component);
            g_assert_cmpuint (one.copies[c].offset, ==, m.copies[c].offset + k);
          }
      }
      pos += m.length;
    }
}

static guint64
random_length (GRand *rand, guint64 max)
{
  guint64 blocks = max / SECTOR;
  /* half short requests (inside a chunk), half long ones (across many) */
  guint64 cap = g_rand_boolean (rand) ? 16 : (3 << 20) / SECTOR;

  cap = MIN (cap, blocks);
  return SECTOR * (guint64) g_rand_int_range (rand, 1, (gint32) cap + 1);
}

static void
test_shape (gconstpointer data)
{
  const Shape *shape = data;
  g_autoptr (GRand) rand = g_rand_new_with_seed (0x7b1c + shape->expected_size);
  VbLayout layout;
  const VbDriver *driver = build (shape, &layout);
  guint copies = expected_copies (shape, &layout);
  Usage usage = { { NULL } };
  guint64 pos = 0, marked = 0;

  for (guint i = 0; i < layout.n_components; i++)
    {
      g_assert_cmpuint (layout.component_sizes[i] % SECTOR, ==, 0);
      usage.count[i] = g_new0 (guint8, layout.component_sizes[i] / SECTOR);
    }

  /* the whole device, front to back, in requests of random lengths */
  while (pos < layout.size)
    {
      guint64 length = random_length (rand, layout.size - pos);
      map_request (shape, driver, &layout, pos, length, &usage);
      pos += length;
    }

  /* no component sector holds two device sectors, and every device sector
   * is held `copies` times; without redundancy the used area is covered
   * exactly: the map is a bijection onto it */
  for (guint i = 0; i < layout.n_components; i++)
    {
      for (guint64 s = 0; s < layout.component_sizes[i] / SECTOR; s++)
        {
          g_assert_cmpuint (usage.count[i][s], <=, 1);
          if (copies == 1)
            g_assert_cmpuint (usage.count[i][s], ==, s * SECTOR >= layout.start ? 1 : 0);
          marked += usage.count[i][s];
        }
      g_free (usage.count[i]);
    }
  g_assert_cmpuint (marked, ==, layout.size / SECTOR * copies);

  /* requests anywhere */
  for (guint i = 0; i < 300; i++)
    {
      guint64 offset
          = SECTOR * (guint64) g_rand_int_range (rand, 0, (gint32) (layout.size / SECTOR));
      map_request (shape, driver, &layout, offset, random_length (rand, layout.size - offset),
                   NULL);
    }
}

static void
assert_piece (const VbDriver *driver, const VbLayout *layout, guint64 offset, guint64 length,
              guint64 expected_length, guint n, const guint64 *expected)
{
  VbMapping m = { 0 };

  driver->map (layout, offset, length, &m);
  g_assert_cmpuint (m.offset, ==, offset);
  g_assert_cmpuint (m.length, ==, expected_length);
  g_assert_cmpuint (m.n_copies, ==, n);
  for (guint c = 0; c < n; c++)
    {
      g_assert_cmpuint (m.copies[c].component, ==, expected[2 * c]);
      g_assert_cmpuint (m.copies[c].offset, ==, expected[2 * c + 1]);
    }
}

#define PIECE(driver, layout, offset, length, expected_length, ...)                                \
  do                                                                                               \
    {                                                                                              \
      const guint64 e_[] = { __VA_ARGS__ };                                                        \
      assert_piece (driver, layout, offset, length, expected_length, G_N_ELEMENTS (e_) / 2, e_);   \
    }                                                                                              \
  while (0)

static void
test_raid0_example (void)
{
  /* 3 components, 4K chunks: chunk k is on component k % 3 at (k / 3) * 4K */
  VbLayout l;
  const VbDriver *d = build (&shapes[8], &l);

  g_assert_cmpuint (l.chunk_size, ==, 4096);
  g_assert_cmpuint (l.component_size, ==, 12288);
  PIECE (d, &l, 0, 16384, 4096, 0, 0);
  PIECE (d, &l, 4096 + 512, 8192, 3584, 1, 512);
  PIECE (d, &l, 8192, 4096, 4096, 2, 0);
  PIECE (d, &l, 12288, 4096, 4096, 0, 4096);
  PIECE (d, &l, 5 * 4096 + 1024, 512, 512, 2, 4096 + 1024);
  PIECE (d, &l, 8 * 4096, 4096, 4096, 2, 8192);
}

static void
test_raid10_example (void)
{
  /* md near, 3 components, 2 copies, 4K chunks (slot s: component s % 3,
   * chunk s / 3) */
  VbLayout l;
  const VbDriver *d = build (&shapes[14], &l);

  g_assert_cmpuint (l.copies, ==, 2);
  PIECE (d, &l, 0, 4096, 4096, 0, 0, 1, 0);
  PIECE (d, &l, 4096, 4096, 4096, 2, 0, 0, 4096);
  PIECE (d, &l, 8192, 8192, 4096, 1, 4096, 2, 4096);
  PIECE (d, &l, 12288, 4096, 4096, 0, 8192, 1, 8192);
  PIECE (d, &l, 4096 + 1024, 8192, 3072, 2, 1024, 0, 5120);
  PIECE (d, &l, 5 * 4096 + 512, 512, 512, 1, 12288 + 512, 2, 12288 + 512);
}

static void
test_raid10_four_example (void)
{
  /* 4 components, 2 copies: the classic raid1+0, pairs (0,1) and (2,3) */
  VbLayout l;
  const VbDriver *d = build (&shapes[15], &l);

  PIECE (d, &l, 0, 8192, 8192, 0, 0, 1, 0);
  PIECE (d, &l, 8192, 8192, 8192, 2, 0, 3, 0);
  PIECE (d, &l, 16384, 8192, 8192, 0, 8192, 1, 8192);
  PIECE (d, &l, 3 * 8192 + 4096, 65536, 4096, 2, 8192 + 4096, 3, 8192 + 4096);
}

static void
test_linear_example (void)
{
  /* 1000, 4096 and 513 bytes count as 512, 4096 and 512 */
  VbLayout l;
  const VbDriver *d = build (&shapes[5], &l);

  g_assert_cmpuint (l.component_sizes[0], ==, 512);
  g_assert_cmpuint (l.component_sizes[1], ==, 4096);
  g_assert_cmpuint (l.component_sizes[2], ==, 512);
  PIECE (d, &l, 0, 4096, 512, 0, 0);
  PIECE (d, &l, 512, 4608, 4096, 1, 0);
  PIECE (d, &l, 1024, 1024, 1024, 1, 512);
  PIECE (d, &l, 4608, 512, 512, 2, 0);
}

static void
test_raid1_example (void)
{
  VbLayout l;
  const VbDriver *d = build (&shapes[12], &l);

  g_assert_cmpuint (l.copies, ==, 3);
  PIECE (d, &l, 4096, 1 << 20, 1 << 20, 0, 4096, 1, 4096, 2, 4096);
  PIECE (d, &l, 0, (1 << 20) + 4096, 1 << 20, 0, 0, 1, 0, 2, 0);
  PIECE (d, &l, 1 << 20, 4096, 4096, 0, 1 << 20, 1, 1 << 20, 2, 1 << 20);
}

static void
test_window_example (void)
{
  VbLayout l;
  const VbDriver *d = build (&shapes[3], &l);

  g_assert_cmpuint (l.start, ==, 8192);
  g_assert_cmpuint (l.component_sizes[0], ==, 8192 + 65536);
  PIECE (d, &l, 512, 1024, 1024, 0, 8704);
  PIECE (d, &l, 0, 65536, 65536, 0, 8192);
}

/* vb_driver_validate refuses @sizes with @attributes and says @message. */
static void
assert_refused (const char *name, const char *const *attributes, guint n, const guint64 *sizes,
                const char *message)
{
  const VbDriver *driver = vb_driver_lookup (name);
  g_autoptr (GHashTable) given = attrs_from (attributes);
  g_autoptr (GHashTable) resolved = NULL;
  g_autoptr (GError) error = NULL;
  VbComponentInfo infos[MAX_COMPONENTS];
  char names[MAX_COMPONENTS][16];

  fill_components (infos, names, n, sizes);
  resolved = vb_driver_resolve_attributes (driver, NULL, given, &error);
  g_assert_no_error (error);
  g_assert_false (vb_driver_validate (driver, resolved, infos, n, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, message);
}

/* vb_driver_resolve_attributes refuses @attributes and says @message. */
static void
assert_attr_refused (const char *name, const char *const *attributes, const char *message)
{
  g_autoptr (GHashTable) given = attrs_from (attributes);
  g_autoptr (GHashTable) resolved = NULL;
  g_autoptr (GError) error = NULL;

  resolved = vb_driver_resolve_attributes (vb_driver_lookup (name), NULL, given, &error);
  g_assert_null (resolved);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, message);
}

#define ATTRS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define NO_ATTRS ((const char *const[]){ NULL })
#define SIZES(...) ((const guint64[]){ __VA_ARGS__ })

static void
test_refusals (void)
{
  guint64 many[MAX_COMPONENTS];

  for (guint i = 0; i < MAX_COMPONENTS; i++)
    many[i] = 1 << 20;

  /* chunk sizes: powers of two from 4K to 64M, nothing else */
  for (const char *const *d = ATTRS ("raid0", "raid10"); *d; d++)
    for (const char *const *v = ATTRS ("12288", "24K", "2K", "0", "128M", "96M"); *v; v++)
      {
        g_autoptr (GHashTable) given = attrs_from (ATTRS ("chunk_size", *v));
        g_autoptr (GHashTable) r
            = vb_driver_resolve_attributes (vb_driver_lookup (*d), NULL, given, NULL);
        g_autofree char *message = g_strdup_printf (
            "attribute 'chunk_size': %s is not a power of two from 4K (4096) to 64M (67108864)",
            (char *) g_hash_table_lookup (r, "chunk_size"));

        assert_refused (*d, ATTRS ("chunk_size", *v), 2, SIZES (1ULL << 30, 1ULL << 30), message);
      }
  assert_refused ("raid0", ATTRS ("chunk_size", "24K"), 2, SIZES (1 << 20, 1 << 20),
                  "attribute 'chunk_size': 24576 is not a power of two from 4K (4096) to 64M "
                  "(67108864)");

  /* components too small to hold one chunk, sector or block */
  assert_refused ("raid0", NO_ATTRS, 3, SIZES (1 << 20, 4000, 1 << 20),
                  "component '/c1': 4000 bytes, smaller than one chunk (524288)");
  assert_refused ("raid10", ATTRS ("chunk_size", "64K"), 2, SIZES (1 << 20, 65535),
                  "component '/c1': 65535 bytes, smaller than one chunk (65536)");
  assert_refused ("raid1", NO_ATTRS, 2, SIZES (1 << 20, 1000),
                  "component '/c1': 1000 bytes, smaller than one block (4096)");
  assert_refused ("linear", NO_ATTRS, 3, SIZES (1 << 20, 100, 1 << 20),
                  "component '/c1': 100 bytes, smaller than one sector (512)");

  /* copies: 2..8, and never more than the components */
  assert_refused ("raid10", ATTRS ("copies", "3"), 2, SIZES (1 << 20, 1 << 20),
                  "attribute 'copies': 3 copies need at least as many components, 2 given");
  assert_attr_refused ("raid10", ATTRS ("copies", "9"),
                       "attribute 'copies': 9 is not allowed (allowed: 2, 3, 4, 5, 6, 7, 8)");
  assert_attr_refused ("raid10", ATTRS ("copies", "1"),
                       "attribute 'copies': 1 is not allowed (allowed: 2, 3, 4, 5, 6, 7, 8)");

  /* component counts, checked for every driver the same way */
  assert_refused ("raid0", NO_ATTRS, 1, many, "components: driver 'raid0' takes 2 to 64, 1 given");
  assert_refused ("raid10", NO_ATTRS, 65, many,
                  "components: driver 'raid10' takes 2 to 64, 65 given");
  assert_refused ("raid1", NO_ATTRS, 9, many, "components: driver 'raid1' takes 1 to 8, 9 given");
  assert_refused ("linear", NO_ATTRS, 65, many,
                  "components: driver 'linear' takes 1 to 64, 65 given");

  /* a device must stay addressable with off_t */
  assert_refused ("linear", NO_ATTRS, 2, SIZES (1ULL << 62, 1ULL << 62),
                  "component '/c1': the device would be larger than 9223372036854775807 bytes");
  assert_refused ("raid0", ATTRS ("chunk_size", "4K"), 4,
                  SIZES (1ULL << 62, 1ULL << 62, 1ULL << 62, 1ULL << 62),
                  "components: the device would be larger than 9223372036854775807 bytes");

  /* no attributes at all */
  assert_attr_refused ("linear", ATTRS ("chunk_size", "4K"),
                       "attribute 'chunk_size': not an attribute of driver 'linear' (allowed: "
                       "metadata)");
  assert_attr_refused (
      "raid1", ATTRS ("copies", "2"),
      "attribute 'copies': not an attribute of driver 'raid1' (allowed: metadata, md_version, "
      "data_offset, data_size, bitmap, bitmap_chunk, sync_speed_min, sync_speed_max)");
  assert_attr_refused ("raid0", ATTRS ("copies", "2"),
                       "attribute 'copies': not an attribute of driver 'raid0' (allowed: "
                       "chunk_size, metadata)");
  /* md1 is an adopted mdadm raid1 or raid10's alone */
  assert_attr_refused ("raid0", ATTRS ("metadata", "md1"),
                       "attribute 'metadata': 'md1' is not allowed (allowed: vblk, none)");
}

/* A device read back from a saved state: raid0 and linear saved before
 * they had superblocks (no metadata attribute) keep their data at byte 0;
 * a new device gets superblocks. */
static void
test_saved_attributes (void)
{
  const VbDriver *raid0 = vb_driver_lookup ("raid0");
  const VbDriver *linear = vb_driver_lookup ("linear");
  const VbDriver *raid1 = vb_driver_lookup ("raid1");
  g_autoptr (GHashTable) old_r0 = attrs_from (ATTRS ("chunk_size", "65536"));
  g_autoptr (GHashTable) new_r0 = attrs_from (ATTRS ("chunk_size", "65536", "metadata", "vblk"));
  g_autoptr (GHashTable) empty = attrs_from (NO_ATTRS);
  g_autoptr (GHashTable) r0 = vb_driver_resolve_saved_attributes (raid0, old_r0, NULL);
  g_autoptr (GHashTable) r0v = vb_driver_resolve_saved_attributes (raid0, new_r0, NULL);
  g_autoptr (GHashTable) lin = vb_driver_resolve_saved_attributes (linear, empty, NULL);
  g_autoptr (GHashTable) lin_new = vb_driver_resolve_attributes (linear, NULL, empty, NULL);
  g_autoptr (GHashTable) r1 = vb_driver_resolve_saved_attributes (raid1, empty, NULL);

  g_assert_cmpstr (g_hash_table_lookup (r0, "metadata"), ==, "none");
  g_assert_cmpstr (g_hash_table_lookup (r0, "chunk_size"), ==, "65536");
  g_assert_cmpuint (vb_driver_data_offset (r0), ==, 0);
  g_assert_cmpstr (g_hash_table_lookup (r0v, "metadata"), ==, "vblk");
  g_assert_cmpuint (vb_driver_data_offset (r0v), ==, 1 << 20);
  g_assert_cmpstr (g_hash_table_lookup (lin, "metadata"), ==, "none");
  g_assert_cmpuint (vb_driver_data_offset (lin), ==, 0);
  g_assert_cmpstr (g_hash_table_lookup (lin_new, "metadata"), ==, "vblk");
  /* raid1 had its metadata attribute from the start: the default */
  g_assert_cmpstr (g_hash_table_lookup (r1, "metadata"), ==, "vblk");
}

static void
test_attributes (void)
{
  const VbDriver *raid0 = vb_driver_lookup ("raid0");
  const VbDriver *raid10 = vb_driver_lookup ("raid10");
  g_autoptr (GHashTable) r0 = vb_driver_resolve_attributes (raid0, NULL, NULL, NULL);
  g_autoptr (GHashTable) r10 = vb_driver_resolve_attributes (raid10, NULL, NULL, NULL);
  g_autoptr (GHashTable) given = attrs_from (ATTRS ("chunk_size", "64K"));
  g_autoptr (GHashTable) r10b = vb_driver_resolve_attributes (raid10, NULL, given, NULL);

  /* chunk_size, and superblocks by default as md keeps them */
  g_assert_cmpuint (g_hash_table_size (r0), ==, 2);
  g_assert_cmpstr (g_hash_table_lookup (r0, "chunk_size"), ==, "524288");
  g_assert_cmpstr (g_hash_table_lookup (r0, "metadata"), ==, "vblk");
  /* chunk_size, copies and the five redundancy attributes of metadata=vblk
   * (md_version, data_offset and data_size are metadata=md1's alone) */
  g_assert_cmpuint (g_hash_table_size (r10), ==, 7);
  g_assert_false (g_hash_table_contains (r10, "md_version"));
  g_assert_false (g_hash_table_contains (r10, "data_offset"));
  g_assert_cmpstr (g_hash_table_lookup (r10, "metadata"), ==, "vblk");
  g_assert_cmpstr (g_hash_table_lookup (r10, "bitmap"), ==, "internal");
  g_assert_cmpstr (g_hash_table_lookup (r10, "bitmap_chunk"), ==, "67108864");
  g_assert_cmpuint (vb_driver_data_offset (r10), ==, 1 << 20);
  g_assert_cmpuint (vb_driver_data_offset (r0), ==, 1 << 20);
  g_assert_true (vb_driver_has_metadata (r10));
  g_assert_true (vb_driver_has_metadata (r0));
  g_assert_true (vb_check_redundancy (r0, NULL));
  /* spares: redundancy and superblocks */
  g_assert_true (vb_driver_takes_spares (raid10, r10));
  g_assert_false (vb_driver_takes_spares (raid0, r0));
  {
    /* an mdadm array: data where its superblocks say */
    g_autoptr (GHashTable) md = attrs_from (
        ATTRS ("metadata", "md1", "bitmap", "none", "data_offset", "2M", "md_version", "1.0"));
    g_autoptr (GHashTable) r1md
        = vb_driver_resolve_attributes (vb_driver_lookup ("raid1"), NULL, md, NULL);
    g_assert_nonnull (r1md);
    g_assert_cmpuint (vb_driver_data_offset (r1md), ==, 2 << 20);
    g_assert_true (vb_driver_has_metadata (r1md));
    g_assert_true (vb_check_redundancy (r1md, NULL));
    g_assert_cmpstr (g_hash_table_lookup (r1md, "md_version"), ==, "1.0");
    g_assert_cmpstr (g_hash_table_lookup (r1md, "data_size"), ==, "0");
  }
  {
    /* md1's own attributes on another metadata: defaults (a state saved
     * before) are dropped, anything else is refused naming it */
    g_autoptr (GError) error = NULL;
    g_autoptr (GHashTable) old = attrs_from (ATTRS ("md_version", "1.2", "data_offset", "0"));
    g_autoptr (GHashTable) bad = attrs_from (ATTRS ("md_version", "1.1"));
    g_autoptr (GHashTable) r1old
        = vb_driver_resolve_attributes (vb_driver_lookup ("raid1"), NULL, old, NULL);
    g_autoptr (GHashTable) r1bad
        = vb_driver_resolve_attributes (vb_driver_lookup ("raid1"), NULL, bad, &error);
    g_assert_nonnull (r1old);
    g_assert_false (g_hash_table_contains (r1old, "md_version"));
    g_assert_false (g_hash_table_contains (r1old, "data_offset"));
    g_assert_null (r1bad);
    g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "attribute 'md_version': only an adopted mdadm"));
  }
  {
    /* a huge value is named cut, with its length */
    g_autoptr (GError) error = NULL;
    g_autofree char *huge = g_strnfill (100000, 'x');
    g_autoptr (GHashTable) huge_given = attrs_from (ATTRS ("chunk_size", huge));
    g_assert_null (vb_driver_resolve_attributes (raid10, NULL, huge_given, &error));
    g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
    g_assert_cmpuint (strlen (error->message), <, 200);
    g_assert_nonnull (strstr (error->message, "(100000 bytes)"));
  }
  g_assert_cmpstr (g_hash_table_lookup (r10, "chunk_size"), ==, "524288");
  g_assert_cmpstr (g_hash_table_lookup (r10, "copies"), ==, "2");
  g_assert_cmpstr (g_hash_table_lookup (r10b, "chunk_size"), ==, "65536");

  /* the bounds themselves are accepted */
  for (const char *const *d = ATTRS ("raid0", "raid10"); *d; d++)
    for (const char *const *v = ATTRS ("4K", "64M"); *v; v++)
      {
        const VbDriver *driver = vb_driver_lookup (*d);
        g_autoptr (GHashTable) chunk = attrs_from (ATTRS ("chunk_size", *v));
        g_autoptr (GHashTable) r = vb_driver_resolve_attributes (driver, NULL, chunk, NULL);
        VbComponentInfo infos[2];
        char names[2][16];

        fill_components (infos, names, 2, SIZES (64 << 20, 64 << 20));
        g_assert_true (vb_driver_validate (driver, r, infos, 2, NULL));
      }

  /* redundancy attributes: choices, the bitmap needs metadata, chunk bounds */
  {
    const VbDriver *raid1 = vb_driver_lookup ("raid1");
    VbComponentInfo infos[2];
    char names[2][16];
    g_autoptr (GError) error = NULL;
    g_autoptr (GHashTable) bad = attrs_from (ATTRS ("metadata", "md"));
    g_autoptr (GHashTable) nobm = attrs_from (ATTRS ("metadata", "none"));
    g_autoptr (GHashTable) small = attrs_from (ATTRS ("bitmap_chunk", "32K"));
    g_autoptr (GHashTable) r = NULL;

    fill_components (infos, names, 2, SIZES (64 << 20, 64 << 20));
    g_assert_null (vb_driver_resolve_attributes (raid1, NULL, bad, &error));
    g_assert_cmpstr (error->message, ==,
                     "attribute 'metadata': 'md' is not allowed (allowed: vblk, none, md1)");
    g_clear_error (&error);
    r = vb_driver_resolve_attributes (raid1, NULL, nobm, &error);
    g_assert_no_error (error);
    g_assert_false (vb_driver_validate (raid1, r, infos, 2, &error));
    g_assert_true (g_str_has_prefix (error->message, "attribute 'bitmap': an internal bitmap"));
    g_clear_error (&error);
    g_clear_pointer (&r, g_hash_table_unref);
    r = vb_driver_resolve_attributes (raid1, NULL, small, &error);
    g_assert_false (vb_driver_validate (raid1, r, infos, 2, &error));
    g_assert_cmpstr (error->message, ==,
                     "attribute 'bitmap_chunk': 32768 is not a power of two of at least 64K");
    g_assert_true (vb_driver_attr_spec (raid1, "sync_speed_max")->online);
    g_assert_false (vb_driver_attr_spec (raid1, "metadata")->online);
  }

  /* changing either moves every byte: a reshape, never an online setting */
  g_assert_false (vb_driver_attr_spec (raid0, "chunk_size")->online);
  g_assert_false (vb_driver_attr_spec (raid10, "chunk_size")->online);
  g_assert_false (vb_driver_attr_spec (raid10, "copies")->online);

  /* the engine runs these; a single extent cannot describe them */
  for (const char *const *n = ATTRS ("linear", "raid0", "raid1", "raid10"); *n; n++)
    {
      const VbDriver *d = vb_driver_lookup (*n);
      g_assert_null (d->extent);
      g_assert_cmpuint (d->component_kinds, ==,
                        VB_COMPONENT_KIND_FILE | VB_COMPONENT_KIND_BLOCK
                            | VB_COMPONENT_KIND_DEVICE);
    }
  g_assert_nonnull (vb_driver_lookup ("file")->extent);
  g_assert_nonnull (vb_driver_lookup ("window")->extent);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (shapes); i++)
    {
      g_autofree char *path = g_strdup_printf ("/layout/walk/%02u-%s-%u-components", i,
                                               shapes[i].driver, shapes[i].n_components);
      g_test_add_data_func (path, &shapes[i], test_shape);
    }
  g_test_add_func ("/layout/raid0-example", test_raid0_example);
  g_test_add_func ("/layout/raid10-near-example", test_raid10_example);
  g_test_add_func ("/layout/raid10-four-example", test_raid10_four_example);
  g_test_add_func ("/layout/linear-example", test_linear_example);
  g_test_add_func ("/layout/raid1-example", test_raid1_example);
  g_test_add_func ("/layout/window-example", test_window_example);
  g_test_add_func ("/layout/refusals", test_refusals);
  g_test_add_func ("/layout/attributes", test_attributes);
  g_test_add_func ("/layout/saved-attributes", test_saved_attributes);
  return g_test_run ();
}
