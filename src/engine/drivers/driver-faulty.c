/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Driver "faulty": one component shown whole, byte for byte, whose reads or
 * writes fail or slow down on request (fault.h) — md's faulty personality
 * and dm-flakey, for testing the redundancy of the devices above it. The
 * engine always serves it, so that every request passes the fault check. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "driver.h"
#include "vb-error.h"

#define FAULTY_SECTOR 512
/* ten seconds: longer only turns a slow component into a hung one */
#define FAULTY_DELAY_MAX 10000000ULL

static const VbAttrSpec faulty_attributes[] = {
  { "fail_reads", VB_ATTR_BOOL, "false", TRUE, 0, NULL, "reads in the fault range fail with EIO" },
  { "fail_writes", VB_ATTR_BOOL, "false", TRUE, 0, NULL,
    "writes, trims and flushes in the fault range fail with EIO" },
  { "fail_after", VB_ATTR_UINT, "0", TRUE, 0, NULL,
    "matching requests that still succeed after the attributes are set" },
  { "fail_offset", VB_ATTR_SIZE, "0", TRUE, FAULTY_SECTOR, NULL,
    "first byte of the fault range in the device" },
  { "fail_length", VB_ATTR_SIZE, "0", TRUE, FAULTY_SECTOR, NULL,
    "length of the fault range in bytes; 0: to the end of the device" },
  { "delay_us", VB_ATTR_UINT, "0", TRUE, 0, NULL,
    "microseconds added to every request (at most 10000000)" },
  { NULL },
};

static guint64
faulty_size (GHashTable *attributes, const VbComponentInfo *components, guint n_components)
{
  return components[0].size / FAULTY_SECTOR * FAULTY_SECTOR;
}

static gboolean
faulty_validate (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
                 GError **error)
{
  guint64 size = faulty_size (attributes, components, n_components);
  guint64 delay = vb_attr_get_u64 (attributes, "delay_us");
  guint64 offset = vb_attr_get_u64 (attributes, "fail_offset");

  if (size == 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("component '%s': %" PRIu64 " bytes, smaller than one sector (%d)"),
                   components[0].source, components[0].size, FAULTY_SECTOR);
      return FALSE;
    }
  if (delay > FAULTY_DELAY_MAX)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("attribute 'delay_us': %" PRIu64 " is more than %llu (ten seconds)"), delay,
                   FAULTY_DELAY_MAX);
      return FALSE;
    }
  /* a range past the end would never match: say so instead of silently
   * injecting nothing */
  if (offset >= size)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("attribute 'fail_offset': %" PRIu64
                      " is beyond the end of the device (%" PRIu64 " bytes)"),
                   offset, size);
      return FALSE;
    }
  return TRUE;
}

static void
faulty_layout (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
               VbLayout *layout)
{
  vb_layout_single (faulty_size (attributes, components, n_components), layout);
}

const VbDriver vb_driver_faulty = {
  .name = "faulty",
  .description = "one component whose reads or writes fail or slow down on request, for testing "
                 "redundancy",
  .attributes = faulty_attributes,
  .min_components = 1,
  .max_components = 1,
  .component_kinds = VB_COMPONENT_KIND_FILE | VB_COMPONENT_KIND_BLOCK | VB_COMPONENT_KIND_DEVICE,
  .validate = faulty_validate,
  .size = faulty_size,
  /* no extent: a kernel loop device would bypass the fault checks */
  .extent = NULL,
  .layout = faulty_layout,
  .map = vb_map_identity,
};
