/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Metadata handler "vblk": the native superblock of superblock.c, at
 * VB_SB_OFFSET of every component. */
#include "metadata.h"
#include "vb-open.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static gboolean
vblk_probe (int fd, const char *path)
{
  void *buf = NULL;
  gssize n;
  gboolean found;
  int own_fd = -1;

  g_return_val_if_fail (fd >= 0 || path != NULL, FALSE);

  /* Read-only: a block device opened for writing sends a change uevent
   * when closed. */
  if (fd < 0)
    {
      own_fd = vb_open_component (path, 0, NULL);
      if (own_fd < 0)
        return FALSE;
      fd = own_fd;
    }
  /* A whole aligned block, so that an O_DIRECT fd reads it too. */
  if (posix_memalign (&buf, VB_SB_SIZE, VB_SB_SIZE) != 0)
    g_error ("out of memory for a %d-byte superblock buffer", VB_SB_SIZE);
  do
    n = pread (fd, buf, VB_SB_SIZE, VB_SB_OFFSET);
  while (n < 0 && errno == EINTR);
  found = n >= VB_SB_MAGIC_LEN && memcmp (buf, VB_SB_MAGIC, VB_SB_MAGIC_LEN) == 0;
  free (buf);
  if (own_fd >= 0)
    close (own_fd);
  return found;
}

static void
vblk_update_role (VbSuperblock *sb, guint role, VbRoleState state)
{
  g_return_if_fail (sb != NULL);
  g_return_if_fail (role < sb->n_roles && role < VB_SB_MAX_ROLES);
  g_return_if_fail (state <= VB_ROLE_MISSING);

  sb->roles[role].state = state;
  /* An empty slot names no component (decode refuses one that does). */
  if (state == VB_ROLE_EMPTY)
    sb->roles[role].uuid[0] = '\0';
  sb->events++;
  sb->utime = (guint64) g_get_real_time ();
}

const VbMetadataHandler vb_metadata_vblk = {
  .name = "vblk",
  .probe = vblk_probe,
  .read = vb_superblock_read,
  .write = vb_superblock_write,
  .update_role = vblk_update_role,
  .block_offset = VB_SB_OFFSET,
  .block_size = VB_SB_SIZE,
  .encode = vb_superblock_encode,
  .decode = vb_superblock_decode,
};
