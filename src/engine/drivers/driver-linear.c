/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Driver "linear": components one after another, like md linear or a dm
 * linear table — the device's first bytes are the first component's, and so
 * on. Each component counts in whole 512-byte sectors. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "driver.h"
#include "vb-error.h"

#define LINEAR_SECTOR 512

static const VbAttrSpec linear_attributes[] = {
  VB_METADATA_ATTRIBUTE,
  { NULL },
};

static gboolean
linear_validate (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
                 GError **error)
{
  guint64 total = 0;

  for (guint i = 0; i < n_components; i++)
    {
      guint64 usable = components[i].size / LINEAR_SECTOR * LINEAR_SECTOR;

      /* an empty component would be a piece of the device with no bytes */
      if (usable == 0)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("component '%s': %" PRIu64 " bytes, smaller than one sector (%d)"),
                       components[i].source, components[i].size, LINEAR_SECTOR);
          return FALSE;
        }
      /* offsets into the device are off_t on every path that serves it */
      if (usable > (guint64) G_MAXINT64 - total)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("component '%s': the device would be larger than %" PRId64 " bytes"),
                       components[i].source, G_MAXINT64);
          return FALSE;
        }
      total += usable;
    }
  return TRUE;
}

static guint64
linear_size (GHashTable *attributes, const VbComponentInfo *components, guint n_components)
{
  guint64 total = 0;

  for (guint i = 0; i < n_components; i++)
    total += components[i].size / LINEAR_SECTOR * LINEAR_SECTOR;
  return total;
}

static void
linear_layout (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
               VbLayout *layout)
{
  g_assert (n_components >= 1 && n_components <= VB_MAX_COMPONENTS);

  *layout = (VbLayout){ 0 };
  layout->n_components = n_components;
  layout->copies = 1;
  layout->component_size = G_MAXUINT64;
  for (guint i = 0; i < n_components; i++)
    {
      layout->component_sizes[i] = components[i].size / LINEAR_SECTOR * LINEAR_SECTOR;
      layout->component_size = MIN (layout->component_size, layout->component_sizes[i]);
      layout->size += layout->component_sizes[i];
    }
}

static void
linear_map (const VbLayout *layout, guint64 offset, guint64 length, VbMapping *out)
{
  guint64 start = 0;
  guint i = 0;

  g_assert (length > 0 && offset < layout->size && length <= layout->size - offset);

  /* at most 64 components: a scan costs less than keeping a search table */
  while (offset - start >= layout->component_sizes[i])
    start += layout->component_sizes[i++];
  out->offset = offset;
  out->length = MIN (length, start + layout->component_sizes[i] - offset);
  out->n_copies = 1;
  out->copies[0].component = i;
  out->copies[0].offset = offset - start;
}

const VbDriver vb_driver_linear = {
  .name = "linear",
  .description = "components one after another",
  .attributes = linear_attributes,
  .min_components = 1,
  .max_components = VB_MAX_COMPONENTS,
  .component_kinds = VB_COMPONENT_KIND_FILE | VB_COMPONENT_KIND_BLOCK | VB_COMPONENT_KIND_DEVICE,
  .validate = linear_validate,
  .size = linear_size,
  .layout = linear_layout,
  .map = linear_map,
};
