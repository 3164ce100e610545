// The plan of this training program (generated in plan.cpp by onnx2soap).
#ifndef TRAIN_PLAN_H
#define TRAIN_PLAN_H

#include "runtime_lib/program/Plan.h"

const onnx2soap::rt::program::Plan &trainingPlan();

#endif
