/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one error domain of vblk. Every error that can reach a D-Bus caller
 * is a VB_ERROR; vb_error_quark() also registers the mapping to the
 * org.vblk.VBlk1.Error.* names, so daemon and client see the same codes. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  VB_ERROR_NOT_AUTHORIZED,
  VB_ERROR_INVALID_ARGUMENT,
  VB_ERROR_NOT_FOUND,
  VB_ERROR_ALREADY_EXISTS,
  VB_ERROR_BUSY,
  VB_ERROR_WOULD_LOSE_DATA,
  VB_ERROR_DEPENDENCY_CYCLE,
  VB_ERROR_NOT_SUPPORTED,
  VB_ERROR_FAILED,
} VbErrorCode;

#define VB_ERROR (vb_error_quark ())
GQuark vb_error_quark (void);

/* "org.vblk.VBlk1.Error.Busy" -> "Busy"; NULL for a code out of range. */
const char *vb_error_short_name (VbErrorCode code);

G_END_DECLS
