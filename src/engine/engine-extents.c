/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What is allocated where (block status for the NBD export): a piece of the
 * device is a hole that reads as zeroes only when every copy a read could
 * take is a hole in its file there. Anything not known that way (a block
 * device, copies a resync has not made equal,
 * an lseek that fails) is data: data is the answer that is never wrong. */
#include "config.h"

#include "engine-component.h"

#include <errno.h>

int
vb_engine_extents (VbEngine *e, guint64 offset, guint64 length, guint64 *run, guint32 *flags)
{
  guint64 frontier = __atomic_load_n (&e->resync_frontier, __ATOMIC_ACQUIRE);
  guint64 hole_run = G_MAXUINT64, data_run = G_MAXUINT64;
  gboolean any_readable = FALSE, all_holes = TRUE;
  VbMapping m;

  if (length == 0 || offset >= e->layout.size || length > e->layout.size - offset)
    return -EINVAL;
  e->driver->map (&e->layout, offset, length, &m);
  *flags = 0;
  *run = m.length;
  /* above the frontier the copies may differ until the resync passes */
  if (offset >= frontier)
    return 0;
  if (offset + m.length > frontier)
    *run = m.length = frontier - offset;
  for (guint k = 0; k < m.n_copies; k++)
    {
      Component *c = &e->components[m.copies[k].component];
      guint64 r;
      if (!engine_leg_readable (c))
        continue;
      any_readable = TRUE;
      if (engine_component_hole (c, m.copies[k].offset, m.length, &r))
        hole_run = MIN (hole_run, r);
      else
        {
          all_holes = FALSE;
          data_run = MIN (data_run, r);
        }
    }
  if (!any_readable)
    return 0;
  /* a hole is said only for whole blocks; a run of data may say more */
  if (all_holes && hole_run >= e->block_size)
    {
      *flags = VB_EXTENT_HOLE | VB_EXTENT_ZERO;
      *run = hole_run / e->block_size * e->block_size;
    }
  else if (all_holes)
    *run = MIN (m.length, (guint64) e->block_size);
  else
    *run = MIN (m.length, (data_run + e->block_size - 1) / e->block_size * e->block_size);
  return 0;
}
