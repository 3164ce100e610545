//===- simulator/ProfileCostModel.h - Measured op times --------*- C++ -*-===//
//
// Measured forward and backward times of op partitions, read from a profile
// file (docs/profile-format.md) and looked up by a canonical key: the op
// kind, the shapes and element types of the regions of each input the
// partition reads and of each output it writes, the size of its contraction
// slice, and the op's attributes that change the work. Where a profile has
// no entry, another cost model (the analytic roofline) answers. Profiles are
// written by `onnx2soap calibrate` on the CPU backend and, with the same key
// format, by generated programs on real GPUs.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SIMULATOR_PROFILECOSTMODEL_H
#define ONNX2SOAP_SIMULATOR_PROFILECOSTMODEL_H

#include "simulator/CostModel.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include <bitset>
#include <optional>
#include <string>
#include <vector>

namespace onnx2soap::simulator {

/// Version of the key format (docs/profile-format.md); a profile file's
/// "version" names the file format, which includes the key format.
constexpr int64_t ProfileFormatVersion = 1;

/// The canonical key of a partition:
///   Kind|i0=f32[8,3,32,32]|i1=f32[16,3,3,3]|i2=-|o0=f32[8,16,32,32]|r=0
///       |dilations=1,1|group=1|kernel_shape=3,3|pads=1,1,1,1|strides=1,1
/// (one line): the kind's name; every input in operand order as
/// `i<N>=<dtype>[<dims>]` (`-` when an optional input is absent); every
/// output as `o<N>=...`; `r=<size of the contraction slice>` (0 when the op
/// has no contraction dim); then the attributes sorted by name except those
/// that only scale values (profileIgnoredAttribute), integers in decimal,
/// lists comma-separated, floats as printf's %.9g, strings with `%`, `|`,
/// `=`, `,` and bytes outside printable ASCII written as %XX.
std::string profileKey(llvm::StringRef KindName,
                       llvm::ArrayRef<const ir::TensorType *> Inputs,
                       llvm::ArrayRef<ir::TensorType> Outputs,
                       int64_t ReductionSize, const ir::Attributes &Attrs);
/// The key of partition P: its input regions (the kind's region rule),
/// output regions and contraction slice.
std::string profileKey(const PartitionShape &P);
/// Attributes left out of keys because they change values, not work:
/// alpha, beta, epsilon, momentum, ratio, seed, value, ignore_index.
bool profileIgnoredAttribute(llvm::StringRef Name);

/// One measured partition shape.
struct ProfileEntry {
  std::string Key;
  double ForwardSeconds = 0;
  /// Absent when the backward was not measured (the fallback answers).
  std::optional<double> BackwardSeconds;
  /// Repeats the times are the median of.
  int64_t Samples = 0;
};

/// Measured box copies as the file has them: the time of one copy of each
/// size (microseconds), and how many timed runs each time summarizes.
struct CopyProfile {
  std::vector<double> SizesBytes, TimesUs;
  int64_t Samples = 0;
  /// In seconds, for SizeTable's interpolation.
  SizeTable table() const;
};

/// The contents of a profile file: measured times on one device type.
struct Profile {
  /// The DeviceType::Name the times were measured on ("cpu", "H100-SXM").
  std::string DeviceType;
  std::vector<ProfileEntry> Entries;
  /// Box copies on that device type, when measured ("copies").
  std::optional<CopyProfile> Copies;
  /// Free-form description of how it was measured (backend, threads,
  /// repeats); kept, not interpreted.
  llvm::json::Object MeasuredWith;

  /// Parses a profile file's text; errors name Where and the JSON path.
  static llvm::Expected<Profile> fromJson(llvm::StringRef Text,
                                          llvm::StringRef Where);
  static llvm::Expected<Profile> fromFile(llvm::StringRef Path);
  /// The file form, entries sorted by key (same profile, same bytes).
  llvm::json::Value toJson() const;
};

/// Profiles over a fallback cost model.
class ProfileCostModel : public CostModel {
public:
  explicit ProfileCostModel(const CostModel &Fallback) : Fallback(Fallback) {}

  /// Adds the times of one device type; an error when a profile of that
  /// device type was added already (Where names the new one).
  llvm::Error add(Profile P, llvm::StringRef Where);
  /// Whether a profile for the device type named Name was added.
  bool hasDeviceType(llvm::StringRef Name) const;
  /// The device types with a profile, in the order added.
  std::vector<std::string> deviceTypes() const;

  TaskTimes opTimes(const PartitionShape &P,
                    const DeviceType &Device) const override;
  /// Updates are not profiled: the fallback's time.
  double updateTime(OptimizerKind Kind, double Elements, ir::DType Type,
                    const DeviceType &Device) const override;
  /// From the device type's measured copies where its profile has them
  /// (each box Bytes / Copies; adding takes half as long again, as the
  /// analytic model has it), else the fallback's.
  double copyTime(double Bytes, unsigned Copies, bool Add,
                  const DeviceType &Device) const override;

  /// The entry for P on the device type named Name, or null.
  const ProfileEntry *lookup(const PartitionShape &P,
                             llvm::StringRef Name) const;
  /// Whether the device type named Name has measured copies.
  bool timesCopies(llvm::StringRef Name) const;

private:
  struct Table {
    std::string DeviceType;
    std::optional<SizeTable> Copies;
    llvm::StringMap<ProfileEntry> Entries;
    /// Kinds with at least one entry: other kinds skip building a key.
    std::bitset<ir::NumOpKinds> Kinds;
  };
  const CostModel &Fallback;
  std::vector<Table> Tables;
};

} // namespace onnx2soap::simulator

#endif
