/* trainbig/trainbig.h: the whole plugin SDK in one include. */
#ifndef TRAINBIG_TRAINBIG_H
#define TRAINBIG_TRAINBIG_H

#include <trainbig/backend.h>
#include <trainbig/dataset.h>
#include <trainbig/edges.h>
#include <trainbig/error.h>
#include <trainbig/file.h>
#include <trainbig/graph.h>
#include <trainbig/half.h>
#include <trainbig/image.h>
#include <trainbig/keys.h>
#include <trainbig/log.h>
#include <trainbig/model.h>
#include <trainbig/ops.h>
#include <trainbig/platform.h>
#include <trainbig/plugin.h>
#include <trainbig/random.h>
#include <trainbig/schedule.h>
#include <trainbig/swap.h>
#include <trainbig/tensor.h>
#include <trainbig/version.h>

#endif
