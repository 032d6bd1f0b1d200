/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Driver "file": one regular file shown whole as a block device. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "driver.h"
#include "vb-error.h"

static const guint64 sector_sizes[] = { 512, 1024, 2048, 4096, 0 };

static const VbAttrSpec file_attributes[] = {
  { "read_only", VB_ATTR_BOOL, "false", FALSE, 0, NULL,
    "refuse writes (fixed while started: the kernel opens the file once)" },
  { "sector_size", VB_ATTR_UINT, "512", TRUE, 0, sector_sizes, "logical block size in bytes" },
  { "engine", VB_ATTR_BOOL, "false", FALSE, 0, NULL,
    "serve it through vblk's engine (a FUSE file under the loop device) instead of a kernel loop "
    "directly on the component: slower, but it can then be reconfigured online (made a mirror)" },
  { NULL },
};

static gboolean
file_validate (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
               GError **error)
{
  guint64 sector = vb_attr_get_u64 (attributes, "sector_size");

  if (components[0].size < sector)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("component '%s': %" PRIu64 " bytes, smaller than one sector (%" PRIu64 ")"),
                   components[0].source, components[0].size, sector);
      return FALSE;
    }
  return TRUE;
}

static guint64
file_size (GHashTable *attributes, const VbComponentInfo *components, guint n_components)
{
  guint64 sector = vb_attr_get_u64 (attributes, "sector_size");

  /* the kernel rounds the loop device down to whole sectors */
  return components[0].size / sector * sector;
}

static void
file_extent (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
             VbExtent *extent)
{
  extent->component = 0;
  extent->offset = 0;
  extent->size = file_size (attributes, components, n_components);
  extent->read_only = vb_attr_get_bool (attributes, "read_only");
  extent->sector_size = (guint) vb_attr_get_u64 (attributes, "sector_size");
}

static void
file_layout (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
             VbLayout *layout)
{
  vb_layout_single (file_size (attributes, components, n_components), layout);
}

const VbDriver vb_driver_file = {
  .name = "file",
  .description = "a regular file as a block device",
  .attributes = file_attributes,
  .min_components = 1,
  .max_components = 1,
  .component_kinds = VB_COMPONENT_KIND_FILE,
  .validate = file_validate,
  .size = file_size,
  .extent = file_extent,
  .layout = file_layout,
  .map = vb_map_identity,
};
