/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Driver "window": a byte range of a block device, file or other device —
 * loop's "primitive partitioning". size 0 means "to the end". */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "driver.h"
#include "vb-error.h"

#define WINDOW_ALIGN 512

static const VbAttrSpec window_attributes[] = {
  { "offset", VB_ATTR_SIZE, "0", FALSE, WINDOW_ALIGN, NULL,
    "first byte of the window in the component" },
  { "size", VB_ATTR_SIZE, "0", TRUE, WINDOW_ALIGN, NULL,
    "length of the window in bytes; 0: to the end of the component" },
  { "read_only", VB_ATTR_BOOL, "false", FALSE, 0, NULL, "refuse writes" },
  { "engine", VB_ATTR_BOOL, "false", FALSE, 0, NULL,
    "serve it through vblk's engine (a FUSE file under the loop device) instead of a kernel loop "
    "directly on the component: slower, but it can then be reconfigured online (made a mirror)" },
  { NULL },
};

static gboolean
window_validate (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
                 GError **error)
{
  guint64 offset = vb_attr_get_u64 (attributes, "offset");
  guint64 size = vb_attr_get_u64 (attributes, "size");
  guint64 avail = components[0].size;

  if (offset >= avail)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("attribute 'offset': %" PRIu64
                      " is beyond the end of component '%s' (%" PRIu64 " bytes)"),
                   offset, components[0].source, avail);
      return FALSE;
    }
  if (size > avail - offset)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("attribute 'size': offset %" PRIu64 " + size %" PRIu64
                      " exceeds component '%s' (%" PRIu64 " bytes)"),
                   offset, size, components[0].source, avail);
      return FALSE;
    }
  if (size == 0 && (avail - offset) < WINDOW_ALIGN)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("attribute 'offset': leaves less than %d bytes of component '%s'"),
                   WINDOW_ALIGN, components[0].source);
      return FALSE;
    }
  return TRUE;
}

static guint64
window_size (GHashTable *attributes, const VbComponentInfo *components, guint n_components)
{
  guint64 offset = vb_attr_get_u64 (attributes, "offset");
  guint64 size = vb_attr_get_u64 (attributes, "size");

  if (size != 0)
    return size;
  if (components[0].size <= offset)
    return 0;
  return (components[0].size - offset) / WINDOW_ALIGN * WINDOW_ALIGN;
}

static void
window_extent (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
               VbExtent *extent)
{
  extent->component = 0;
  extent->offset = vb_attr_get_u64 (attributes, "offset");
  extent->size = window_size (attributes, components, n_components);
  extent->read_only = vb_attr_get_bool (attributes, "read_only");
  extent->sector_size = WINDOW_ALIGN;
}

static void
window_layout (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
               VbLayout *layout)
{
  *layout = (VbLayout){ 0 };
  layout->n_components = 1;
  layout->copies = 1;
  layout->start = vb_attr_get_u64 (attributes, "offset");
  layout->size = window_size (attributes, components, n_components);
  /* what the window reaches, not the whole component: nothing past it is ours */
  layout->component_size = layout->start + layout->size;
  layout->component_sizes[0] = layout->component_size;
}

static void
window_map (const VbLayout *layout, guint64 offset, guint64 length, VbMapping *out)
{
  g_assert (length > 0 && offset < layout->size && length <= layout->size - offset);

  out->offset = offset;
  out->length = length;
  out->n_copies = 1;
  out->copies[0].component = 0;
  out->copies[0].offset = layout->start + offset;
}

const VbDriver vb_driver_window = {
  .name = "window",
  .description = "a byte range of a block device, file or device",
  .attributes = window_attributes,
  .min_components = 1,
  .max_components = 1,
  .component_kinds = VB_COMPONENT_KIND_FILE | VB_COMPONENT_KIND_BLOCK | VB_COMPONENT_KIND_DEVICE,
  .validate = window_validate,
  .size = window_size,
  .extent = window_extent,
  .layout = window_layout,
  .map = window_map,
};
