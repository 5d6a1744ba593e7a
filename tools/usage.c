/* tools/usage.c: the usage texts of the trainbig command (usage.h), one per command. */
#include "config.h"

#include "tools/usage.h"

const char tb_usage_main[] =
    "usage: trainbig COMMAND [ARGS]\n"
    "\n"
    "Trains large segmentation networks with tensors swapped between device and host memory.\n"
    "\n"
    "commands:\n"
    "  train CONFIG [--set SECTION.KEY=VALUE]... [--resume CHECKPOINT]\n"
    "                                              validate CONFIG and train\n"
    "  predict CONFIG --checkpoint C --input IMAGE.png --output OUT.png [--set ...]\n"
    "                                              segment an image with a trained model\n"
    "  data CONFIG [--show N DIR] [--set ...]      count, decode and summarise the dataset,\n"
    "                                              or picture N training samples in DIR\n"
    "  fit CONFIG --vary batch|crop [--set ...]    the largest batch or crop each swap policy fits\n"
    "  probe CONFIG [--set ...]                    host-device copy rates beside the platform's\n"
    "  plot RUN_DIR [--out DIR]                    a run's loss, accuracy, throughput, swapping and\n"
    "                                              per-class IoU as PNG and SVG figures\n"
    "  study CONFIG [--out DIR] [--backend NAME] [--scale small|reference|test] [--only N,...] [--set ...]\n"
    "                                              the study's benchmarks: DIR/report.md and figures\n"
    "  config CONFIG [--set SECTION.KEY=VALUE]...  print the effective configuration\n"
    "  plugins [--kind KIND]                       list the plugins that can be loaded\n"
    "  version                                     print version, ABI and build features\n"
    "  help [COMMAND]                              this text, or a command's\n"
    "\n"
    "Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error.\n"
    "Environment: TRAINBIG_PLUGIN_PATH (plugin directories, searched first),\n"
    "TRAINBIG_LOG (error, warn, info, debug). See trainbig(1) and trainbig.ini(5).\n";

const char tb_usage_train[] = "usage: trainbig train CONFIG [--set SECTION.KEY=VALUE]... [--resume CHECKPOINT]\n"
                              "\n"
                              "Validates the whole of CONFIG (every section, key and value, and every plugin it\n"
                              "names) and then trains. --set overrides one key and may be repeated; it is validated\n"
                              "like the file. The run writes its checkpoints and per-epoch reports into a new run\n"
                              "directory, [run] output/name (name.2, name.3 ... when that holds an earlier run).\n"
                              "\n"
                              "--resume CHECKPOINT continues a run from one of its checkpoints, in its directory;\n"
                              "on the CPU backend the result is bit-identical to a run that never stopped.\n"
                              "\n"
                              "SIGINT (Ctrl-C) or SIGTERM: the current step finishes, a checkpoint is written, and\n"
                              "train exits 128 + the signal (130, 143) saying how to resume. A second signal stops\n"
                              "at once.\n";

const char tb_usage_predict[] =
    "usage: trainbig predict CONFIG --checkpoint CHECKPOINT --input IMAGE.png --output OUT.png\n"
    "                        [--set SECTION.KEY=VALUE]...\n"
    "\n"
    "Runs the model CONFIG describes, with the weights of CHECKPOINT (written by train with\n"
    "the same [model] settings), on IMAGE.png at its own size, and writes OUT.png (each\n"
    "pixel coloured by its predicted class, in the dataset's palette), OUT-overlay.png (the\n"
    "same blended over the image) and OUT-edges.png (the model's edge map, white = edge).\n"
    "Prints the share of each predicted class.\n";

const char tb_usage_data[] =
    "usage: trainbig data CONFIG [--show N DIR] [--set SECTION.KEY=VALUE]...\n"
    "\n"
    "Opens the train, val and test splits of the dataset CONFIG names and decodes every\n"
    "sample (a progress bar on a terminal). Prints per split the sample count, the image\n"
    "sizes, each sample that cannot be read with the reason, and the share of pixels of\n"
    "each class. Exits 1 when any sample is bad, 0 otherwise.\n"
    "\n"
    "With --show N DIR, instead writes the first N training samples of epoch 1 as the\n"
    "data loader makes them (cropped and augmented as [dataset] says) to DIR/sample-NNNN.png:\n"
    "the image, and beside it the labels blended over it in the dataset's palette.\n";

const char tb_usage_fit[] = "usage: trainbig fit CONFIG --vary batch|crop [--set SECTION.KEY=VALUE]...\n"
                            "\n"
                            "Finds, under each swap policy (none, lru, prefetch), the largest [train] batch or\n"
                            "[dataset] crop whose training step completes with the configured device memory, by\n"
                            "running real steps (doubling, then bisecting), and prints: the policy, the largest\n"
                            "value, its step time, the same step with unlimited memory and no swapping, the\n"
                            "overhead, the share of the step stalled on copies, and batch x pixels against none.\n";

const char tb_usage_study[] =
    "usage: trainbig study CONFIG [--out DIR] [--backend NAME] [--scale small|reference|test]\n"
    "                      [--only N,...] [--set SECTION.KEY=VALUE]...\n"
    "\n"
    "Runs the \"Training Big on Images\" study's benchmarks on CONFIG and writes DIR/report.md\n"
    "(default DIR: study) with a figure per benchmark (PNG and SVG), each beside the study's\n"
    "published numbers: 1 training time per platform and time to a target mIoU, 2 the use of\n"
    "LMS (a batch x crop grid: fits, swaps, does not fit), 3 LMS overhead per platform, policy\n"
    "and size, 4 one step's timeline per platform with its idle gaps, 5 scaling over ranks.\n"
    "The platforms are the study's machines (ac922, dgx-station, p3.8xlarge), emulated on the\n"
    "cpu backend. --scale small (default) finishes in about 15 minutes on 2 cores; reference\n"
    "is the study's own sizes, for a GPU; test runs tiny sizes in about a minute (to try the\n"
    "command; its numbers mean nothing). --only 2,3 runs those benchmarks alone. A progress\n"
    "line says which benchmark runs and about how long is left. A benchmark that fails is\n"
    "reported as such; the others still run, and the study exits 1. --backend sim\n"
    "(--set backend.plugin=sim) runs it on the study's machines modelled, at the reference\n"
    "scale unless --scale says otherwise: every figure is then predicted, and says so.\n";

const char tb_usage_probe[] = "usage: trainbig probe CONFIG [--set SECTION.KEY=VALUE]...\n"
                              "\n"
                              "Measures how fast the configured backend copies between host and device memory (64 MiB\n"
                              "copies: pinned host memory each way and both ways at once, pageable each way) and\n"
                              "prints it beside the link the configured platform describes. With [backend]\n"
                              "emulate_link = yes the CPU backend's copies follow the emulated link.\n";

const char tb_usage_plot[] = "usage: trainbig plot RUN_DIR [--out DIR]\n"
                             "\n"
                             "Reads RUN_DIR/epochs.jsonl, the per-epoch report of a run of trainbig train (the last\n"
                             "run in it, with its resumptions), and writes into DIR (default RUN_DIR/plots, created)\n"
                             "each figure as NAME.png and NAME.svg:\n"
                             "  loss        the training loss per epoch, total and each term (log scale)\n"
                             "  accuracy    validation mIoU and pixel accuracy, for the validated epochs\n"
                             "  throughput  training images per second per epoch\n"
                             "  swap        MiB swapped out and in per epoch, and the seconds stalled on copies\n"
                             "  class_iou   the IoU of each class at the last validation\n"
                             "Prints the paths written. A line of epochs.jsonl that cannot be read is named\n"
                             "(FILE:LINE) and nothing is written. Needs a build with PLplot and jansson.\n";

const char tb_usage_config[] =
    "usage: trainbig config CONFIG [--set SECTION.KEY=VALUE]...\n"
    "\n"
    "Validates CONFIG like train does, then prints the effective configuration as an INI\n"
    "file: every key of every section, its value, and where the value came from (FILE:LINE,\n"
    "--set, default, or auto with the score that chose the plugin).\n";

const char tb_usage_plugins[] =
    "usage: trainbig plugins [--kind KIND]\n"
    "\n"
    "Lists every plugin found in the plugin search path, in search order: its kind, name,\n"
    "version, ABI, file, description, and each key with its type, default, allowed values\n"
    "and help. Files that were refused (and why) or shadowed by an earlier file of the same\n"
    "name are listed after them. KIND is backend, platform, model, dataset or swap; with\n"
    "--kind, only files named KIND-*.so are opened (the only ones found by name).\n";

const char tb_usage_version[] = "usage: trainbig version\n\nPrints the version, the plugin ABI, the optional\n"
                                "features this build has, and the plugin search path.\n";

const char tb_usage_help[] = "usage: trainbig help [COMMAND]\n\nPrints the overview, or COMMAND's usage.\n";
