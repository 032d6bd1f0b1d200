/* Driver "raid0": striping, md's raid0 layout over components of equal
 * size: chunk k of the device is chunk k / n of component k % n. Components
 * count as large as the smallest, in whole chunks. */
#include "config.h"

#include "driver.h"
#include "vb-error.h"

#define RAID0_CHUNK_MIN (4ULL << 10)
#define RAID0_CHUNK_MAX (64ULL << 20)

static const VbAttrSpec raid0_attributes[] = {
  /* not online: changing it moves every byte (a reshape, not a setting) */
  { "chunk_size", VB_ATTR_SIZE, "524288", FALSE, 0, NULL,
    "bytes per chunk: a power of two from 4K to 64M" },
  { NULL },
};

static guint64
smallest_component (const VbComponentInfo *components, guint n_components, guint *which)
{
  guint64 smallest = G_MAXUINT64;

  for (guint i = 0; i < n_components; i++)
    if (components[i].size < smallest)
      {
        smallest = components[i].size;
        *which = i;
      }
  return smallest;
}

static gboolean
raid0_validate (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
                GError **error)
{
  guint64 chunk = vb_attr_get_u64 (attributes, "chunk_size");
  guint which = 0;
  guint64 smallest = smallest_component (components, n_components, &which);

  /* a power of two from 4K: any logical block size up to 4K divides a
   * chunk, so no block is split between two components */
  if (chunk < RAID0_CHUNK_MIN || chunk > RAID0_CHUNK_MAX || (chunk & (chunk - 1)) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   "attribute 'chunk_size': %" G_GUINT64_FORMAT
                   " is not a power of two from 4K (4096) to 64M (67108864)",
                   chunk);
      return FALSE;
    }
  if (smallest < chunk)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   "component '%s': %" G_GUINT64_FORMAT
                   " bytes, smaller than one chunk (%" G_GUINT64_FORMAT ")",
                   components[which].source, smallest, chunk);
      return FALSE;
    }
  /* offsets into the device are off_t on every path that serves it */
  if (smallest / chunk * chunk > (guint64) G_MAXINT64 / n_components)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   "components: the device would be larger than %" G_GINT64_FORMAT " bytes",
                   G_MAXINT64);
      return FALSE;
    }
  return TRUE;
}

static guint64
raid0_component_size (GHashTable *attributes, const VbComponentInfo *components, guint n_components)
{
  guint64 chunk = vb_attr_get_u64 (attributes, "chunk_size");
  guint which = 0;

  return smallest_component (components, n_components, &which) / chunk * chunk;
}

static guint64
raid0_size (GHashTable *attributes, const VbComponentInfo *components, guint n_components)
{
  return raid0_component_size (attributes, components, n_components) * n_components;
}

static void
raid0_layout (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
              VbLayout *layout)
{
  g_assert (n_components >= 1 && n_components <= VB_MAX_COMPONENTS);

  *layout = (VbLayout){ 0 };
  layout->n_components = n_components;
  layout->copies = 1;
  layout->chunk_size = vb_attr_get_u64 (attributes, "chunk_size");
  layout->component_size = raid0_component_size (attributes, components, n_components);
  for (guint i = 0; i < n_components; i++)
    layout->component_sizes[i] = layout->component_size;
  layout->size = layout->component_size * n_components;
}

static void
raid0_map (const VbLayout *layout, guint64 offset, guint64 length, VbMapping *out)
{
  guint64 chunk = offset / layout->chunk_size;
  guint64 within = offset % layout->chunk_size;

  g_assert (length > 0 && offset < layout->size && length <= layout->size - offset);

  out->offset = offset;
  out->length = MIN (length, layout->chunk_size - within);
  out->n_copies = 1;
  out->copies[0].component = chunk % layout->n_components;
  out->copies[0].offset = chunk / layout->n_components * layout->chunk_size + within;
}

const VbDriver vb_driver_raid0 = {
  .name = "raid0",
  .description = "striping over components, no redundancy",
  .attributes = raid0_attributes,
  .min_components = 2,
  .max_components = VB_MAX_COMPONENTS,
  .component_kinds = VB_COMPONENT_KIND_FILE | VB_COMPONENT_KIND_BLOCK | VB_COMPONENT_KIND_DEVICE,
  .validate = raid0_validate,
  .size = raid0_size,
  .layout = raid0_layout,
  .map = raid0_map,
};
