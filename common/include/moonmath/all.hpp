// Everything of the moonmath device library.
#pragma once
#include "moonmath/buffer.hpp"
#include "moonmath/convert.hpp"
#include "moonmath/lds.hpp"
#include "moonmath/mfma.hpp"
#include "moonmath/numerics.hpp"
#include "moonmath/prelude.hpp"
#include "moonmath/softmax.hpp"
#include "moonmath/sync.hpp"
#include "moonmath/tile.hpp"
#include "moonmath/xlane.hpp"
