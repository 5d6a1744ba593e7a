/* plugins/datasets/cityscapes_classes.h: the 19 Cityscapes training classes, names and
 * colours (cityscapesScripts labels.py), indexed by trainId: the label space of the
 * cityscapes plugin and of the synthetic scenes. Header-only, one copy per plugin. */
#ifndef TB_PLUGINS_DATASETS_CITYSCAPES_CLASSES_H
#define TB_PLUGINS_DATASETS_CITYSCAPES_CLASSES_H

#include <trainbig/dataset.h>

enum { TB_CITYSCAPES_CLASSES = 19 };

static const struct tb_class tb_cityscapes_classes[TB_CITYSCAPES_CLASSES] = {
    { "road", { 128, 64, 128 } },
    { "sidewalk", { 244, 35, 232 } },
    { "building", { 70, 70, 70 } },
    { "wall", { 102, 102, 156 } },
    { "fence", { 190, 153, 153 } },
    { "pole", { 153, 153, 153 } },
    { "traffic light", { 250, 170, 30 } },
    { "traffic sign", { 220, 220, 0 } },
    { "vegetation", { 107, 142, 35 } },
    { "terrain", { 152, 251, 152 } },
    { "sky", { 70, 130, 180 } },
    { "person", { 220, 20, 60 } },
    { "rider", { 255, 0, 0 } },
    { "car", { 0, 0, 142 } },
    { "truck", { 0, 0, 70 } },
    { "bus", { 0, 60, 100 } },
    { "train", { 0, 80, 100 } },
    { "motorcycle", { 0, 0, 230 } },
    { "bicycle", { 119, 11, 32 } },
};

#endif
