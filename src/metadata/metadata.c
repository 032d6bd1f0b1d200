/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The list of metadata handlers. Adding a format adds one handler-*.c file
 * and one line here. */
#include "metadata.h"

#include <string.h>

static const VbMetadataHandler *const handlers[] = {
  &vb_metadata_vblk,
  &vb_metadata_md1,
  NULL,
};

const VbMetadataHandler *const *
vb_metadata_handlers (void)
{
  return handlers;
}

const VbMetadataHandler *
vb_metadata_lookup (const char *name)
{
  g_return_val_if_fail (name != NULL, NULL);

  for (gsize i = 0; handlers[i] != NULL; i++)
    if (strcmp (handlers[i]->name, name) == 0)
      return handlers[i];
  return NULL;
}
