# tests/fuzz/fuzz.mk: builds the fuzz targets with clang's libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer (GNU make). tests/fuzz/run calls it for `make fuzz`, passing:
#   srcdir, builddir  the source tree and the configured build tree (config.h)
#   out               where objects and targets go (fuzz-build/ in the build tree)
#   CC                clang
#   CORE_SOURCES      libtrainbig's sources, as Makefile.am lists them (relative to srcdir)
#   DEP_CFLAGS, DEP_LIBS  the libraries configure found (iniparser, libspng, ...)
#   TARGETS           the fuzz targets to build (ini png jpeg checkpoint taco)
# The code under test is instrumented for coverage (-fsanitize=fuzzer-no-link); only the
# targets link libFuzzer, whose main() runs them.
SAN = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=c11 -g -O1 $(SAN) -fsanitize=fuzzer-no-link -Wall -Wextra -Wno-unused-parameter
FUZZ_CPPFLAGS = -I$(builddir) -I$(srcdir) -I$(srcdir)/include -I$(builddir)/include $(DEP_CFLAGS) \
	-DTB_PLUGINSDIR='"$(out)/no-plugins"' -DTB_BUILD_LIBDIR='"$(out)/no-lib"' \
	-DTB_BUILD_PLUGIN_DIRS='"$(out)/no-plugins"'

CORE_OBJS = $(patsubst %.c,$(out)/obj/%.o,$(filter %.c,$(CORE_SOURCES)))
TACO_OBJS = $(out)/obj/plugins/datasets/taco/taco_json.o $(out)/obj/plugins/datasets/taco/taco_raster.o

all: $(TARGETS:%=$(out)/fuzz_%)

$(out)/obj/%.o: $(srcdir)/%.c
	@mkdir -p $(@D)
	@echo "  CC(fuzz) $*.c"
	@$(CC) $(FUZZ_CPPFLAGS) -I$(srcdir)/plugins/datasets/taco $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(out)/fuzz_taco: $(TACO_OBJS)
$(out)/fuzz_%: $(out)/obj/tests/fuzz/fuzz_%.o $(CORE_OBJS)
	@echo "  LD(fuzz) $(@F)"
	@$(CC) $(SAN) -fsanitize=fuzzer -o $@ $^ $(DEP_LIBS) -ldl -lpthread -lm

-include $(CORE_OBJS:.o=.d) $(TACO_OBJS:.o=.d) $(TARGETS:%=$(out)/obj/tests/fuzz/fuzz_%.d)
.PHONY: all
.DELETE_ON_ERROR:
.SECONDARY:

# The checkpoint seeds' writer (seed_checkpoint.c), not a fuzz target: no libFuzzer main.
$(out)/seed_checkpoint: $(out)/obj/tests/fuzz/seed_checkpoint.o $(CORE_OBJS)
	@$(CC) $(SAN) -fsanitize=fuzzer-no-link -o $@ $^ $(DEP_LIBS) -ldl -lpthread -lm
